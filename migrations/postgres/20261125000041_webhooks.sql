-- Click webhook subscriptions (issue 36). Each row is also its delivery state: the feed position
-- of the next event to send (cursor_seq, cursor_index: index cursor_index of visit_feed row
-- cursor_seq), the lease of the sidecar delivering it (one at a time; others take over when
-- lease_until_ms has passed) and the retry state of the batch at the cursor. `revision` grows
-- with every change through the API, so a deliverer's write made under an older one is refused.
-- The secret is kept as given: it signs every POST. Times are Unix ms.
CREATE TABLE webhook_subscriptions (
    -- `wh_` and 16 random hex digits, made by the sidecar.
    id               TEXT COLLATE "C" PRIMARY KEY,
    name             TEXT NOT NULL,
    url              TEXT NOT NULL,
    secret           TEXT NOT NULL,
    -- JSON arrays of strings; both empty: every visit.
    campaigns        TEXT NOT NULL,
    tags             TEXT NOT NULL,
    include_bots     BIGINT NOT NULL,
    batch_size       BIGINT NOT NULL,
    batch_ms         BIGINT NOT NULL,
    created_ms       BIGINT NOT NULL,
    revision         BIGINT NOT NULL DEFAULT 1,
    cursor_seq       BIGINT NOT NULL,
    cursor_index     BIGINT NOT NULL,
    lease_owner      TEXT,
    lease_until_ms   BIGINT NOT NULL DEFAULT 0,
    delivered        BIGINT NOT NULL DEFAULT 0,
    -- The first failed attempt since the last delivery; NULL while deliveries succeed.
    failing_since_ms BIGINT,
    attempts         BIGINT NOT NULL DEFAULT 0,
    last_error       TEXT
);

-- Events given up on after the retry window: a range of the feed, kept for replay.
CREATE TABLE webhook_failures (
    id              BIGSERIAL PRIMARY KEY,
    subscription_id TEXT COLLATE "C" NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    from_seq        BIGINT NOT NULL,
    from_index      BIGINT NOT NULL,
    to_seq          BIGINT NOT NULL,
    to_index        BIGINT NOT NULL,
    events          BIGINT NOT NULL,
    failed_ms       BIGINT NOT NULL,
    error           TEXT NOT NULL
);
CREATE INDEX webhook_failures_subscription ON webhook_failures (subscription_id, id);
