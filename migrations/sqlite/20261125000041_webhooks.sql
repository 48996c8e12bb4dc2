-- Click webhook subscriptions (issue 36). Each row is also its delivery state: the feed position
-- of the next event to send (cursor_seq, cursor_index: index cursor_index of visit_feed row
-- cursor_seq), the lease of the sidecar delivering it (one at a time; others take over when
-- lease_until_ms has passed) and the retry state of the batch at the cursor. `revision` grows
-- with every change through the API, so a deliverer's write made under an older one is refused.
-- The secret is kept as given: it signs every POST. Times are Unix ms.
CREATE TABLE webhook_subscriptions (
    -- `wh_` and 16 random hex digits, made by the sidecar.
    id               TEXT PRIMARY KEY NOT NULL,
    name             TEXT NOT NULL,
    url              TEXT NOT NULL,
    secret           TEXT NOT NULL,
    -- JSON arrays of strings; both empty: every visit.
    campaigns        TEXT NOT NULL,
    tags             TEXT NOT NULL,
    include_bots     INTEGER NOT NULL,
    batch_size       INTEGER NOT NULL,
    batch_ms         INTEGER NOT NULL,
    created_ms       INTEGER NOT NULL,
    revision         INTEGER NOT NULL DEFAULT 1,
    cursor_seq       INTEGER NOT NULL,
    cursor_index     INTEGER NOT NULL,
    lease_owner      TEXT,
    lease_until_ms   INTEGER NOT NULL DEFAULT 0,
    delivered        INTEGER NOT NULL DEFAULT 0,
    -- The first failed attempt since the last delivery; NULL while deliveries succeed.
    failing_since_ms INTEGER,
    attempts         INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT
);

-- Events given up on after the retry window: a range of the feed, kept for replay.
CREATE TABLE webhook_failures (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    subscription_id TEXT NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    from_seq        INTEGER NOT NULL,
    from_index      INTEGER NOT NULL,
    to_seq          INTEGER NOT NULL,
    to_index        INTEGER NOT NULL,
    events          INTEGER NOT NULL,
    failed_ms       INTEGER NOT NULL,
    error           TEXT NOT NULL
);
CREATE INDEX webhook_failures_subscription ON webhook_failures (subscription_id, id);
