-- Click webhook subscriptions (issue 36). Each row is also its delivery state: the feed position
-- of the next event to send (cursor_seq, cursor_index: index cursor_index of visit_feed row
-- cursor_seq), the lease of the sidecar delivering it (one at a time; others take over when
-- lease_until_ms has passed) and the retry state of the batch at the cursor. `revision` grows
-- with every change through the API, so a deliverer's write made under an older one is refused.
-- The secret is kept as given: it signs every POST. Times are Unix ms.
CREATE TABLE webhook_subscriptions (
    -- `wh_` and 16 random hex digits, made by the sidecar.
    id               VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    name             TEXT NOT NULL,
    url              TEXT NOT NULL,
    secret           TEXT NOT NULL,
    -- JSON arrays of strings; both empty: every visit.
    campaigns        MEDIUMTEXT NOT NULL,
    tags             MEDIUMTEXT NOT NULL,
    include_bots     BIGINT NOT NULL,
    batch_size       BIGINT NOT NULL,
    batch_ms         BIGINT NOT NULL,
    created_ms       BIGINT NOT NULL,
    revision         BIGINT NOT NULL DEFAULT 1,
    cursor_seq       BIGINT NOT NULL,
    cursor_index     BIGINT NOT NULL,
    lease_owner      VARCHAR(255) NULL,
    lease_until_ms   BIGINT NOT NULL DEFAULT 0,
    delivered        BIGINT NOT NULL DEFAULT 0,
    -- The first failed attempt since the last delivery; NULL while deliveries succeed.
    failing_since_ms BIGINT NULL,
    attempts         BIGINT NOT NULL DEFAULT 0,
    last_error       TEXT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Events given up on after the retry window: a range of the feed, kept for replay.
CREATE TABLE webhook_failures (
    id              BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    subscription_id VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    from_seq        BIGINT NOT NULL,
    from_index      BIGINT NOT NULL,
    to_seq          BIGINT NOT NULL,
    to_index        BIGINT NOT NULL,
    events          BIGINT NOT NULL,
    failed_ms       BIGINT NOT NULL,
    error           TEXT NOT NULL,
    KEY webhook_failures_subscription (subscription_id, id),
    CONSTRAINT webhook_failures_subscription_fk FOREIGN KEY (subscription_id)
        REFERENCES webhook_subscriptions (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
