-- The send job's queue in SQL (issue 68): see the PostgreSQL migration of the same number.
CREATE TABLE gateway_pending (
    workspace_id BIGINT NOT NULL,
    job_id       VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    idx          BIGINT NOT NULL,
    code         VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    short_url    VARCHAR(2200) NULL,
    phone        VARCHAR(32) NOT NULL,
    text         TEXT NOT NULL,
    PRIMARY KEY (job_id, idx),
    CONSTRAINT gateway_pending_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    KEY gateway_pending_code (workspace_id, code)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

ALTER TABLE gateway_jobs
    ADD COLUMN api_key_id BIGINT NULL,
    ADD COLUMN dlr_base VARCHAR(2400) NULL,
    ADD COLUMN claimed_by VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
    ADD COLUMN lease_ms BIGINT NULL,
    ADD COLUMN handing_idx BIGINT NULL,
    ADD COLUMN queued_ms BIGINT NULL,
    ADD COLUMN reports_ms BIGINT NULL,
    ADD KEY gateway_jobs_open (finished_ms, lease_ms);

ALTER TABLE gateway_configs ADD COLUMN reports_hours BIGINT NOT NULL DEFAULT 72;
