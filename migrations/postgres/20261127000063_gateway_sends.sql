-- Compose's hand-off to an SMS gateway (issue 68, docs/DELIVERIES.md "Sending through Kannel").
-- Times are Unix milliseconds, as the receipts'. No phone number and no password is stored: the
-- password is read from a file the operator's --gateway-secrets-dir holds, the recipient's number
-- goes to the gateway and nowhere else.

-- A workspace's gateway, set by its admin (one per workspace).
CREATE TABLE gateway_configs (
    workspace_id  BIGINT PRIMARY KEY CONSTRAINT gateway_configs_workspace REFERENCES workspaces (id),
    kind          TEXT COLLATE "C" NOT NULL,
    url           TEXT NOT NULL,
    username      TEXT NOT NULL,
    -- A file name inside --gateway-secrets-dir, never the password.
    password_file TEXT NOT NULL,
    sender        TEXT NOT NULL,
    -- The base the gateway reaches this sidecar's /callbacks/ at (the dlr-url's).
    callback_base TEXT NOT NULL,
    per_second    BIGINT NOT NULL,
    attempts      BIGINT NOT NULL,
    backoff_ms    BIGINT NOT NULL,
    updated_ms    BIGINT NOT NULL
);

-- One compose request that sends: the callback token its dlr-urls carry, and how it ended.
CREATE TABLE gateway_jobs (
    id                TEXT COLLATE "C" PRIMARY KEY,
    workspace_id      BIGINT NOT NULL CONSTRAINT gateway_jobs_workspace REFERENCES workspaces (id),
    campaign          TEXT,
    callback_token_id TEXT COLLATE "C" NOT NULL,
    created_ms        BIGINT NOT NULL,
    finished_ms       BIGINT,
    -- Why it stopped early (a revoked key, a suspended workspace), if it did.
    stopped           TEXT
);
CREATE INDEX gateway_jobs_workspace ON gateway_jobs (workspace_id, created_ms);

-- Per recipient of a job, what the gateway answered.
CREATE TABLE gateway_sends (
    workspace_id BIGINT NOT NULL CONSTRAINT gateway_sends_workspace REFERENCES workspaces (id),
    job_id       TEXT COLLATE "C" NOT NULL,
    idx          BIGINT NOT NULL,
    code         TEXT COLLATE "C" NOT NULL,
    message_id   TEXT COLLATE "C" NOT NULL,
    -- accepted, refused (the gateway said no), failed (never answered), skipped, stopped
    outcome      TEXT COLLATE "C" NOT NULL,
    http_status  BIGINT,
    answer       TEXT,
    attempts     BIGINT NOT NULL,
    at_ms        BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, job_id, idx)
);
-- A link already accepted by the gateway is not sent again (a retried compose).
CREATE INDEX gateway_sends_code ON gateway_sends (workspace_id, code);
