-- Retention per workspace and per campaign (issue 56): see the PostgreSQL migration of the same
-- number.
CREATE TABLE retention_policies (
    workspace_id          INTEGER NOT NULL,
    campaign              TEXT NOT NULL,
    visits_days           INTEGER CHECK (visits_days >= 1),
    conversions_days      INTEGER CHECK (conversions_days >= 1),
    webhook_failures_days INTEGER CHECK (webhook_failures_days >= 1),
    anonymize_ip          INTEGER,
    PRIMARY KEY (workspace_id, campaign)
);
