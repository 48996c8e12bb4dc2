-- Personal data requests (issue 56): see the PostgreSQL migration of the same number.
CREATE TABLE subject_requests (
    id           TEXT PRIMARY KEY NOT NULL,
    workspace_id INTEGER NOT NULL,
    request_key  TEXT NOT NULL,
    selector     TEXT NOT NULL,
    state        TEXT NOT NULL,
    codes        TEXT NOT NULL,
    tombstone    TEXT NOT NULL,
    links        INTEGER NOT NULL DEFAULT 0,
    visits       INTEGER NOT NULL DEFAULT 0,
    conversions  INTEGER NOT NULL DEFAULT 0,
    created_ms   INTEGER NOT NULL,
    finished_ms  INTEGER
);
CREATE UNIQUE INDEX subject_requests_key ON subject_requests (workspace_id, request_key);
CREATE INDEX subject_requests_workspace ON subject_requests (workspace_id, created_ms);
