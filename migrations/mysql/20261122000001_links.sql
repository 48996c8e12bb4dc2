-- Links, API keys, idempotency keys, the sequence and settings (MariaDB / MySQL): the final schema
-- of the PostgreSQL and SQLite migrations 1, 2, 5, 7, 9, 10, 11 and 20 in one file, since this
-- backend starts from it. The visit store's tables are in their own migration (…03_visits.sql).
--
-- InnoDB everywhere (transactions, row locks, crash recovery). Text is utf8mb4; keys compared
-- byte for byte use a binary collation: codes are case-sensitive (`aB3` and `Ab3` are two links),
-- as are idempotency keys and setting names. Times are DATETIME(6) in UTC (every connection sets
-- time_zone '+00:00'): TIMESTAMP would end in 2038. The connection's sql_mode is strict and has
-- ANSI_QUOTES (see sidecar/src/storage/mysql), so a value too long for its column is refused, never
-- cut, and "key" quotes the column name as in the other backends' SQL.

CREATE TABLE links (
    -- Generated codes and aliases: at most 64 ASCII letters, digits, `-` and `_`.
    code            VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    target          MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    -- SHA-256 (hex) of target: finds the live link for an idempotent create. VARCHAR, not CHAR:
    -- MariaDB refuses a generated column (url_prefix) over a CHAR, whose padding depends on sql_mode.
    url_hash        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    redirect_status SMALLINT NOT NULL CHECK (redirect_status IN (301, 302, 307, 308)),
    -- Link record flag bits (1 = forward the query string).
    flags           INT NOT NULL DEFAULT 0,
    created_at      DATETIME(6) NOT NULL,
    updated_at      DATETIME(6) NOT NULL,
    expires_at      DATETIME(6) NULL,
    revoked_at      DATETIME(6) NULL,
    visit_count     BIGINT NOT NULL DEFAULT 0,
    last_visit_at   DATETIME(6) NULL,
    -- Caller metadata (at most 200 bytes each, checked by the API): the campaign, an opaque
    -- recipient reference, free tags (a JSON array of strings, NULL for none).
    campaign        VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    recipient_ref   VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    tags            JSON NULL,
    -- The request (idempotency_keys.id) and item index that created the link, for requests sent
    -- with an Idempotency-Key: a retry finds the items already committed.
    batch_id        BIGINT NULL,
    batch_index     BIGINT NULL,
    -- What the URL-hash index holds: the hash's first 16 hex digits, only for links an idempotent
    -- create may hand out again (not revoked, no recipient). MariaDB has no partial index; NULL
    -- keys of a virtual column stand in for the PostgreSQL index's WHERE.
    url_prefix      VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin
        AS (IF(revoked_at IS NULL AND recipient_ref IS NULL, LEFT(url_hash, 16), NULL)) VIRTUAL,
    PRIMARY KEY (code),
    -- Several NULLs are allowed: only requests with an Idempotency-Key have slots.
    UNIQUE KEY links_batch_slot (batch_id, batch_index),
    -- Keyset pagination, newest first; filters and per-campaign aggregation.
    KEY links_created_at (created_at DESC, code DESC),
    KEY links_campaign (campaign, created_at DESC, code DESC),
    KEY links_recipient_ref (recipient_ref),
    KEY links_url_prefix (url_prefix)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE api_keys (
    id         BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name       TEXT NOT NULL,
    -- SHA-256 (hex) of the key; the key itself is never stored.
    key_hash   CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    created_at DATETIME(6) NOT NULL,
    revoked_at DATETIME(6) NULL,
    role       VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'admin',
    CONSTRAINT api_keys_role CHECK (role IN ('admin', 'issuer', 'viewer', 'resolve')),
    UNIQUE KEY api_keys_key_hash (key_hash)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- One row per sequence: the next free number. Leases add to it under the row's lock (see
-- MysqlStorage::lease_sequence_block), so concurrent sidecars never get overlapping blocks.
CREATE TABLE sequence_blocks (
    name       VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    next_value BIGINT NOT NULL CHECK (next_value >= 0)
) ENGINE = InnoDB;

INSERT INTO sequence_blocks (name, next_value) VALUES ('links', 0);

-- One row per Idempotency-Key (at most 255 visible ASCII characters) and API key (0 for the
-- command line). request_hash is the SHA-256 of the request's kind and its first items.
CREATE TABLE idempotency_keys (
    id           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    api_key_id   BIGINT NOT NULL,
    "key"        VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    request_hash CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    created_at   DATETIME(6) NOT NULL,
    UNIQUE KEY idempotency_keys_key (api_key_id, "key"),
    -- Pruned after --idempotency-retention, oldest first.
    KEY idempotency_keys_created_at (created_at)
) ENGINE = InnoDB;

-- Settings the stored data depends on, recorded on first start and checked on every start.
CREATE TABLE settings (
    name       VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    value      TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    updated_at DATETIME(6) NOT NULL
) ENGINE = InnoDB;
