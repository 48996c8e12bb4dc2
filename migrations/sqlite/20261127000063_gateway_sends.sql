-- Compose's hand-off to an SMS gateway (issue 68): see the PostgreSQL migration of the same number.
CREATE TABLE gateway_configs (
    workspace_id  INTEGER PRIMARY KEY NOT NULL REFERENCES workspaces (id),
    kind          TEXT NOT NULL,
    url           TEXT NOT NULL,
    username      TEXT NOT NULL,
    password_file TEXT NOT NULL,
    sender        TEXT NOT NULL,
    callback_base TEXT NOT NULL,
    per_second    INTEGER NOT NULL,
    attempts      INTEGER NOT NULL,
    backoff_ms    INTEGER NOT NULL,
    updated_ms    INTEGER NOT NULL
);

CREATE TABLE gateway_jobs (
    id                TEXT PRIMARY KEY NOT NULL,
    workspace_id      INTEGER NOT NULL REFERENCES workspaces (id),
    campaign          TEXT,
    callback_token_id TEXT NOT NULL,
    created_ms        INTEGER NOT NULL,
    finished_ms       INTEGER,
    stopped           TEXT
);
CREATE INDEX gateway_jobs_workspace ON gateway_jobs (workspace_id, created_ms);

CREATE TABLE gateway_sends (
    workspace_id INTEGER NOT NULL REFERENCES workspaces (id),
    job_id       TEXT NOT NULL,
    idx          INTEGER NOT NULL,
    code         TEXT NOT NULL,
    message_id   TEXT NOT NULL,
    outcome      TEXT NOT NULL,
    http_status  INTEGER,
    answer       TEXT,
    attempts     INTEGER NOT NULL,
    at_ms        INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, job_id, idx)
);
CREATE INDEX gateway_sends_code ON gateway_sends (workspace_id, code);
