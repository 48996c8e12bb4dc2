-- Link events for the webhooks (issue 79): see the PostgreSQL migration of the same number.
CREATE TABLE link_events (
    id              VARCHAR(40) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    workspace_id    BIGINT NOT NULL,
    code            VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    kind            VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    feed            VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    entry           MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    reason          VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    at_ms           BIGINT NOT NULL,
    KEY link_events_at (at_ms)
) ENGINE = InnoDB;

ALTER TABLE webhook_subscriptions ADD COLUMN link_events BIGINT NOT NULL DEFAULT 1;
