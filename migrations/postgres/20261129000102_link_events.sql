-- Link events for the webhooks (issue 79): a quarantine or a release of a link, told to its
-- workspace's subscribers through the same feed as clicks and conversions. The row is written in
-- the transaction that quarantines or releases the link, with one `visit_feed` row holding its
-- id (`le_…`), so it takes its place in the feed's order by the same clock; the deliverers read
-- it back by id. No target: a receiver learns the code, the feed and the entry.
CREATE TABLE link_events (
    id              TEXT COLLATE "C" PRIMARY KEY,
    workspace_id    BIGINT NOT NULL,
    code            TEXT COLLATE "C" NOT NULL,
    -- `link.quarantined` or `link.released`.
    kind            TEXT NOT NULL,
    feed            TEXT NOT NULL,
    entry           TEXT NOT NULL,
    -- Why: `listed`, `held` (at create, held for review), `released` (by an admin or the
    -- operator), `unlisted` (the entry left its feed), `target_changed` (a PATCH).
    reason          TEXT NOT NULL,
    at_ms           BIGINT NOT NULL
);
CREATE INDEX link_events_at ON link_events (at_ms);

-- Whether a subscription hears of its workspace's quarantines and releases (default: yes).
ALTER TABLE webhook_subscriptions ADD COLUMN link_events BIGINT NOT NULL DEFAULT 1;
