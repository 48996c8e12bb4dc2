-- Initial schema (PostgreSQL). Times are timestamptz (UTC).

CREATE TABLE links (
    -- Byte order ("C"), as in SQLite: codes are ASCII, and it keeps ordering locale-independent.
    code            TEXT COLLATE "C" PRIMARY KEY,
    target          TEXT NOT NULL,
    -- SHA-256 (hex) of target: finds the live link for an idempotent create.
    url_hash        TEXT NOT NULL,
    redirect_status SMALLINT NOT NULL CHECK (redirect_status IN (301, 302, 307, 308)),
    -- Link record flag bits (1 = forward the query string).
    flags           INTEGER NOT NULL DEFAULT 0,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    expires_at      TIMESTAMPTZ,
    revoked_at      TIMESTAMPTZ,
    visit_count     BIGINT NOT NULL DEFAULT 0,
    last_visit_at   TIMESTAMPTZ
);

-- Keyset pagination, newest first.
CREATE INDEX links_created_at ON links (created_at DESC, code DESC);
-- Idempotent create looks only at links that are not revoked.
CREATE INDEX links_url_hash_unrevoked ON links (url_hash) WHERE revoked_at IS NULL;

CREATE TABLE api_keys (
    id         BIGSERIAL PRIMARY KEY,
    name       TEXT NOT NULL,
    -- SHA-256 (hex) of the key; the key itself is never stored.
    key_hash   TEXT NOT NULL UNIQUE,
    created_at TIMESTAMPTZ NOT NULL,
    revoked_at TIMESTAMPTZ
);

-- One row per sequence: the next free number. Processes lease blocks with
-- UPDATE ... SET next_value = next_value + size RETURNING next_value - size,
-- which row-locks, so concurrent sidecars never get overlapping blocks.
CREATE TABLE sequence_blocks (
    name       TEXT PRIMARY KEY,
    next_value BIGINT NOT NULL CHECK (next_value >= 0)
);

INSERT INTO sequence_blocks (name, next_value) VALUES ('links', 0);
