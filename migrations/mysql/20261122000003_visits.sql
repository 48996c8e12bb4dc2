-- Visit analytics (MariaDB / MySQL): the visit store's tables, in a migration of their own so they
-- can change without touching the links'. The final schema of the PostgreSQL migrations 3 and 8.
-- Rollup buckets are Unix seconds at the start of the UTC hour or day (integers, as on the other
-- backends). Rollup rows use '' for "unknown" (primary key columns cannot be NULL). MariaDB has no
-- unbounded key columns: dimension columns are VARCHARs sized to fit InnoDB's 3072-byte keys.

-- Raw visits: one row per stream entry. event_id (the entry id) is the idempotency key that makes
-- a redelivered batch harmless. Kept for --visit-retention (default: forever); stats never read it.
CREATE TABLE visits (
    event_id        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    code            VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    visited_at      DATETIME(6) NOT NULL,
    status          SMALLINT NULL,
    ip              VARCHAR(64) NULL,
    -- 16 bytes of SHA-256(ip, 0, user agent), computed on the full address.
    visitor         BINARY(16) NOT NULL,
    user_agent      TEXT NULL,
    browser         VARCHAR(100) NULL,
    browser_version VARCHAR(100) NULL,
    os              VARCHAR(100) NULL,
    os_version      VARCHAR(100) NULL,
    device          VARCHAR(100) NOT NULL,
    -- human, bot or preview
    audience        VARCHAR(16) NOT NULL,
    -- who the bot or preview fetcher is (Slack, WhatsApp, curl); NULL for people
    agent           VARCHAR(100) NULL,
    country         VARCHAR(100) NULL,
    region          VARCHAR(100) NULL,
    city            VARCHAR(100) NULL,
    isp             VARCHAR(255) NULL,
    referrer_host   VARCHAR(253) NULL,
    short_domain    VARCHAR(253) NULL,
    language        VARCHAR(100) NULL,
    -- The retention job deletes by time.
    KEY visits_visited_at (visited_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Every (link, human visitor) pair ever seen: unique visitors are exact and counted once, in the
-- bucket of their first visit (visit_buckets.new_visitors).
CREATE TABLE link_visitors (
    code       VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    visitor    BINARY(16) NOT NULL,
    first_seen DATETIME(6) NOT NULL,
    PRIMARY KEY (code, visitor)
) ENGINE = InnoDB;

-- Counts per link (code '*' = all links) per hour (span 3600) and per day (span 86400).
CREATE TABLE visit_buckets (
    code         VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    span         INT NOT NULL,
    bucket       BIGINT NOT NULL,
    humans       BIGINT NOT NULL DEFAULT 0,
    bots         BIGINT NOT NULL DEFAULT 0,
    previews     BIGINT NOT NULL DEFAULT 0,
    new_visitors BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (code, span, bucket),
    -- Top links over a range.
    KEY visit_buckets_span_bucket (span, bucket, code)
) ENGINE = InnoDB;

-- Daily breakdowns, one table per group of dimensions that vary together (so a visit costs three
-- upserts, not nine): user agent, place, source.
CREATE TABLE visit_agents (
    code     VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    day      BIGINT NOT NULL,
    browser  VARCHAR(100) NOT NULL,
    os       VARCHAR(100) NOT NULL,
    device   VARCHAR(100) NOT NULL,
    agent    VARCHAR(100) NOT NULL,
    humans   BIGINT NOT NULL DEFAULT 0,
    bots     BIGINT NOT NULL DEFAULT 0,
    previews BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (code, day, browser, os, device, agent)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE visit_places (
    code     VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    day      BIGINT NOT NULL,
    country  VARCHAR(100) NOT NULL,
    region   VARCHAR(100) NOT NULL,
    city     VARCHAR(100) NOT NULL,
    humans   BIGINT NOT NULL DEFAULT 0,
    bots     BIGINT NOT NULL DEFAULT 0,
    previews BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (code, day, country, region, city)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE visit_sources (
    code          VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    day           BIGINT NOT NULL,
    referrer_host VARCHAR(253) NOT NULL,
    short_domain  VARCHAR(253) NOT NULL,
    humans        BIGINT NOT NULL DEFAULT 0,
    bots          BIGINT NOT NULL DEFAULT 0,
    previews      BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (code, day, referrer_host, short_domain)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The idle-link expiry job looks for live links by last visit. MariaDB has no expression or
-- partial index: a virtual column holds the expression, NULL for revoked links; the job's query
-- says `idle_since < ?`.
ALTER TABLE links
    ADD COLUMN idle_since DATETIME(6)
        AS (IF(revoked_at IS NULL, COALESCE(last_visit_at, created_at), NULL)) VIRTUAL,
    ADD KEY links_idle (idle_since);
