-- Visit analytics (PostgreSQL). Written only by the consumer of the `sl:events` stream.
-- Rollup buckets are Unix seconds at the start of the UTC hour or day (integers, as on SQLite, so
-- bucket arithmetic is the same on both backends). Rollup rows use '' for "unknown" (primary key
-- columns cannot be NULL).

-- Raw visits: one row per stream entry. event_id (the entry id) is the idempotency key that makes
-- a redelivered batch harmless. Kept for --visit-retention (default: forever); stats never read it.
CREATE TABLE visits (
    event_id        TEXT COLLATE "C" PRIMARY KEY,
    code            TEXT COLLATE "C" NOT NULL,
    visited_at      TIMESTAMPTZ NOT NULL,
    status          SMALLINT,
    ip              TEXT,
    -- 16 bytes of SHA-256(ip, 0, user agent), computed on the full address.
    visitor         BYTEA NOT NULL,
    user_agent      TEXT,
    browser         TEXT,
    browser_version TEXT,
    os              TEXT,
    os_version      TEXT,
    device          TEXT NOT NULL,
    -- human, bot or preview
    audience        TEXT NOT NULL,
    -- who the bot or preview fetcher is (Slack, WhatsApp, curl); NULL for people
    agent           TEXT,
    country         TEXT,
    region          TEXT,
    city            TEXT,
    isp             TEXT,
    referrer_host   TEXT,
    short_domain    TEXT,
    language        TEXT
);

-- The retention job deletes by time.
CREATE INDEX visits_visited_at ON visits (visited_at);

-- Every (link, human visitor) pair ever seen: unique visitors are exact and counted once, in the
-- bucket of their first visit (visit_buckets.new_visitors).
CREATE TABLE link_visitors (
    code       TEXT COLLATE "C" NOT NULL,
    visitor    BYTEA NOT NULL,
    first_seen TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (code, visitor)
);

-- Counts per link (code '*' = all links) per hour (span 3600) and per day (span 86400).
CREATE TABLE visit_buckets (
    code         TEXT COLLATE "C" NOT NULL,
    span         INTEGER NOT NULL,
    bucket       BIGINT NOT NULL,
    humans       BIGINT NOT NULL DEFAULT 0,
    bots         BIGINT NOT NULL DEFAULT 0,
    previews     BIGINT NOT NULL DEFAULT 0,
    new_visitors BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (code, span, bucket)
);

-- Top links over a range.
CREATE INDEX visit_buckets_span_bucket ON visit_buckets (span, bucket, code);

-- Daily breakdowns, one table per group of dimensions that vary together (so a visit costs three
-- upserts, not nine): user agent, place, source.
CREATE TABLE visit_agents (
    code     TEXT COLLATE "C" NOT NULL,
    day      BIGINT NOT NULL,
    browser  TEXT NOT NULL,
    os       TEXT NOT NULL,
    device   TEXT NOT NULL,
    agent    TEXT NOT NULL,
    humans   BIGINT NOT NULL DEFAULT 0,
    bots     BIGINT NOT NULL DEFAULT 0,
    previews BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (code, day, browser, os, device, agent)
);

CREATE TABLE visit_places (
    code     TEXT COLLATE "C" NOT NULL,
    day      BIGINT NOT NULL,
    country  TEXT NOT NULL,
    region   TEXT NOT NULL,
    city     TEXT NOT NULL,
    humans   BIGINT NOT NULL DEFAULT 0,
    bots     BIGINT NOT NULL DEFAULT 0,
    previews BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (code, day, country, region, city)
);

CREATE TABLE visit_sources (
    code          TEXT COLLATE "C" NOT NULL,
    day           BIGINT NOT NULL,
    referrer_host TEXT NOT NULL,
    short_domain  TEXT NOT NULL,
    humans        BIGINT NOT NULL DEFAULT 0,
    bots          BIGINT NOT NULL DEFAULT 0,
    previews      BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (code, day, referrer_host, short_domain)
);

-- The idle-link expiry job looks for live links by last visit.
CREATE INDEX links_idle ON links ((COALESCE(last_visit_at, created_at))) WHERE revoked_at IS NULL;
