-- The send job's queue in SQL (issue 68): see the PostgreSQL migration of the same number.
CREATE TABLE gateway_pending (
    workspace_id INTEGER NOT NULL REFERENCES workspaces (id),
    job_id       TEXT NOT NULL,
    idx          INTEGER NOT NULL,
    code         TEXT NOT NULL,
    short_url    TEXT,
    phone        TEXT NOT NULL,
    text         TEXT NOT NULL,
    PRIMARY KEY (job_id, idx)
);
CREATE INDEX gateway_pending_code ON gateway_pending (workspace_id, code);

ALTER TABLE gateway_jobs ADD COLUMN api_key_id INTEGER;
ALTER TABLE gateway_jobs ADD COLUMN dlr_base TEXT;
ALTER TABLE gateway_jobs ADD COLUMN claimed_by TEXT;
ALTER TABLE gateway_jobs ADD COLUMN lease_ms INTEGER;
ALTER TABLE gateway_jobs ADD COLUMN handing_idx INTEGER;
ALTER TABLE gateway_jobs ADD COLUMN queued_ms INTEGER;
ALTER TABLE gateway_jobs ADD COLUMN reports_ms INTEGER;
CREATE INDEX gateway_jobs_open ON gateway_jobs (finished_ms, lease_ms);

ALTER TABLE gateway_configs ADD COLUMN reports_hours INTEGER NOT NULL DEFAULT 72;
