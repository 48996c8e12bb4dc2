-- Retention per workspace and per campaign (issue 56): see the PostgreSQL migration of the same
-- number.
CREATE TABLE retention_policies (
    workspace_id          BIGINT NOT NULL,
    campaign              VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    visits_days           BIGINT NULL CHECK (visits_days >= 1),
    conversions_days      BIGINT NULL CHECK (conversions_days >= 1),
    webhook_failures_days BIGINT NULL CHECK (webhook_failures_days >= 1),
    anonymize_ip          BIGINT NULL,
    PRIMARY KEY (workspace_id, campaign)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
