-- The send job's queue in SQL (issue 68, docs/DELIVERIES.md "Sending through Kannel"): a compose
-- that sends writes its messages here before its answer; a sidecar holding the job's lease hands
-- them to the gateway and deletes each row once its outcome is in gateway_sends.

-- One message waiting for its hand-off. The recipient's number lives here and nowhere else, and
-- only until the hand-off (or the refusal, failure or stop) is recorded: the row is deleted then.
CREATE TABLE gateway_pending (
    workspace_id BIGINT NOT NULL CONSTRAINT gateway_pending_workspace REFERENCES workspaces (id),
    job_id       TEXT COLLATE "C" NOT NULL,
    idx          BIGINT NOT NULL,
    code         TEXT COLLATE "C" NOT NULL,
    short_url    TEXT,
    phone        TEXT NOT NULL,
    text         TEXT NOT NULL,
    PRIMARY KEY (job_id, idx)
);
-- A subject's erase finds its pending messages by link.
CREATE INDEX gateway_pending_code ON gateway_pending (workspace_id, code);

-- The key whose standing the job follows; the dlr-url base with the job's callback token (kept
-- while the job sends, so a sidecar resuming it sets the same dlr-url; cleared when it ends);
-- who sends it until when (the lease); the message whose hand-off started and whose outcome is
-- not yet recorded; when compose queued its last message; how long reports can still come after
-- it ended (then its token is revoked; NULL once it is).
ALTER TABLE gateway_jobs ADD COLUMN api_key_id BIGINT;
ALTER TABLE gateway_jobs ADD COLUMN dlr_base TEXT;
ALTER TABLE gateway_jobs ADD COLUMN claimed_by TEXT COLLATE "C";
ALTER TABLE gateway_jobs ADD COLUMN lease_ms BIGINT;
ALTER TABLE gateway_jobs ADD COLUMN handing_idx BIGINT;
ALTER TABLE gateway_jobs ADD COLUMN queued_ms BIGINT;
ALTER TABLE gateway_jobs ADD COLUMN reports_ms BIGINT;
CREATE INDEX gateway_jobs_open ON gateway_jobs (finished_ms, lease_ms);

-- How long after a job ends its reports may still come (the SMSC's validity period).
ALTER TABLE gateway_configs ADD COLUMN reports_hours BIGINT NOT NULL DEFAULT 72;
