-- Link events for the webhooks (issue 79): see the PostgreSQL migration of the same number.
CREATE TABLE link_events (
    id              TEXT PRIMARY KEY NOT NULL,
    workspace_id    INTEGER NOT NULL,
    code            TEXT NOT NULL,
    kind            TEXT NOT NULL,
    feed            TEXT NOT NULL,
    entry           TEXT NOT NULL,
    reason          TEXT NOT NULL,
    at_ms           INTEGER NOT NULL
);
CREATE INDEX link_events_at ON link_events (at_ms);

ALTER TABLE webhook_subscriptions ADD COLUMN link_events INTEGER NOT NULL DEFAULT 1;
