-- Initial schema (SQLite). Times are UTC text in one fixed-width RFC 3339 form,
-- YYYY-MM-DDTHH:MM:SS.ffffffZ, so text order is time order.

CREATE TABLE links (
    code            TEXT PRIMARY KEY NOT NULL,
    target          TEXT NOT NULL,
    -- SHA-256 (hex) of target: finds the live link for an idempotent create.
    url_hash        TEXT NOT NULL,
    redirect_status INTEGER NOT NULL CHECK (redirect_status IN (301, 302, 307, 308)),
    -- Link record flag bits (1 = forward the query string).
    flags           INTEGER NOT NULL DEFAULT 0,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    expires_at      TEXT,
    revoked_at      TEXT,
    visit_count     INTEGER NOT NULL DEFAULT 0,
    last_visit_at   TEXT
);

-- Keyset pagination, newest first.
CREATE INDEX links_created_at ON links (created_at DESC, code DESC);
-- Idempotent create looks only at links that are not revoked.
CREATE INDEX links_url_hash_unrevoked ON links (url_hash) WHERE revoked_at IS NULL;

CREATE TABLE api_keys (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT NOT NULL,
    -- SHA-256 (hex) of the key; the key itself is never stored.
    key_hash   TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);

-- One row per sequence: the next free number. Processes lease blocks with
-- UPDATE ... SET next_value = next_value + size RETURNING next_value - size.
CREATE TABLE sequence_blocks (
    name       TEXT PRIMARY KEY NOT NULL,
    next_value INTEGER NOT NULL CHECK (next_value >= 0)
);

INSERT INTO sequence_blocks (name, next_value) VALUES ('links', 0);
