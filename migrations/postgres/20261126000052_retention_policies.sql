-- Retention per workspace and per campaign (issue 56, docs/PRIVACY.md "Retention"): how long a
-- workspace keeps its raw visits, conversions and webhook failures, and whether its visitors'
-- addresses are truncated. `campaign` '' is the workspace's own row; a campaign's row overrides
-- it for that campaign's links (visits and conversions). NULL: the next level decides (the
-- campaign's falls back to the workspace's, the workspace's to the installation's flags).
CREATE TABLE retention_policies (
    workspace_id          BIGINT NOT NULL,
    campaign              TEXT COLLATE "C" NOT NULL,
    visits_days           BIGINT CHECK (visits_days >= 1),
    conversions_days      BIGINT CHECK (conversions_days >= 1),
    webhook_failures_days BIGINT CHECK (webhook_failures_days >= 1),
    -- 1: truncate; NULL: as --anonymize-ip. The workspace's row only.
    anonymize_ip          BIGINT,
    PRIMARY KEY (workspace_id, campaign)
);
