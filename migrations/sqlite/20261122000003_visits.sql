-- Visit analytics (SQLite). Written only by the consumer of the `sl:events` stream.
-- Times here are integers: visits.visited_at is Unix milliseconds, rollup buckets are Unix seconds
-- at the start of the UTC hour or day. Rollup rows use '' for "unknown" (a primary key column cannot
-- be NULL in PostgreSQL, and both backends share one shape).

-- Raw visits: one row per stream entry. event_id (the entry id) is the idempotency key that makes
-- a redelivered batch harmless. Kept for --visit-retention (default: forever); stats never read it.
CREATE TABLE visits (
    event_id        TEXT PRIMARY KEY NOT NULL,
    code            TEXT NOT NULL,
    visited_at      INTEGER NOT NULL,
    status          INTEGER,
    ip              TEXT,
    -- 16 bytes of SHA-256(ip, 0, user agent), computed on the full address.
    visitor         BLOB NOT NULL,
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
    code       TEXT NOT NULL,
    visitor    BLOB NOT NULL,
    first_seen INTEGER NOT NULL,
    PRIMARY KEY (code, visitor)
) WITHOUT ROWID;

-- Counts per link (code '*' = all links) per hour (span 3600) and per day (span 86400).
CREATE TABLE visit_buckets (
    code         TEXT NOT NULL,
    span         INTEGER NOT NULL,
    bucket       INTEGER NOT NULL,
    humans       INTEGER NOT NULL DEFAULT 0,
    bots         INTEGER NOT NULL DEFAULT 0,
    previews     INTEGER NOT NULL DEFAULT 0,
    new_visitors INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (code, span, bucket)
) WITHOUT ROWID;

-- Top links over a range.
CREATE INDEX visit_buckets_span_bucket ON visit_buckets (span, bucket, code);

-- Daily breakdowns, one table per group of dimensions that vary together (so a visit costs three
-- upserts, not nine): user agent, place, source.
CREATE TABLE visit_agents (
    code     TEXT NOT NULL,
    day      INTEGER NOT NULL,
    browser  TEXT NOT NULL,
    os       TEXT NOT NULL,
    device   TEXT NOT NULL,
    agent    TEXT NOT NULL,
    humans   INTEGER NOT NULL DEFAULT 0,
    bots     INTEGER NOT NULL DEFAULT 0,
    previews INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (code, day, browser, os, device, agent)
) WITHOUT ROWID;

CREATE TABLE visit_places (
    code     TEXT NOT NULL,
    day      INTEGER NOT NULL,
    country  TEXT NOT NULL,
    region   TEXT NOT NULL,
    city     TEXT NOT NULL,
    humans   INTEGER NOT NULL DEFAULT 0,
    bots     INTEGER NOT NULL DEFAULT 0,
    previews INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (code, day, country, region, city)
) WITHOUT ROWID;

CREATE TABLE visit_sources (
    code          TEXT NOT NULL,
    day           INTEGER NOT NULL,
    referrer_host TEXT NOT NULL,
    short_domain  TEXT NOT NULL,
    humans        INTEGER NOT NULL DEFAULT 0,
    bots          INTEGER NOT NULL DEFAULT 0,
    previews      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (code, day, referrer_host, short_domain)
) WITHOUT ROWID;

-- The idle-link expiry job looks for live links by last visit.
CREATE INDEX links_idle ON links (COALESCE(last_visit_at, created_at)) WHERE revoked_at IS NULL;
