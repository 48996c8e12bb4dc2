-- Personal data requests (issue 56, docs/PRIVACY.md): one row per erase request of a workspace,
-- which is also its progress, so a request cut short (a restart, a lost connection) is finished
-- by sending it again. `request_key` is the caller's `request_id` (the idempotency key). The
-- selector itself (the ref, which is the personal data) is never stored: only its kind, the
-- codes of the links it found (what is left to do) and the counts. Times are Unix ms.
CREATE TABLE subject_requests (
    -- `sr_` and 16 random hex digits.
    id           TEXT COLLATE "C" PRIMARY KEY,
    -- No foreign key: a deleted workspace's requests stay, as the record that they were done.
    workspace_id BIGINT NOT NULL,
    request_key  TEXT COLLATE "C" NOT NULL,
    -- `ref`, `campaign_ref` or `code`
    selector     TEXT NOT NULL,
    -- `running` until every link is done, then `done`
    state        TEXT NOT NULL,
    -- The links found, one code per line.
    codes        TEXT COLLATE "C" NOT NULL,
    -- What the links' ref became: random, derived from nothing.
    tombstone    TEXT COLLATE "C" NOT NULL,
    links        BIGINT NOT NULL DEFAULT 0,
    visits       BIGINT NOT NULL DEFAULT 0,
    conversions  BIGINT NOT NULL DEFAULT 0,
    created_ms   BIGINT NOT NULL,
    finished_ms  BIGINT
);
CREATE UNIQUE INDEX subject_requests_key ON subject_requests (workspace_id, request_key);
CREATE INDEX subject_requests_workspace ON subject_requests (workspace_id, created_ms);
