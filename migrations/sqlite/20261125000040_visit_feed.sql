-- The visit feed (issue 36): the order in which stored visits are handed out, by the resumable
-- feed (GET /api/v1/visits) and the click webhooks. Each visit write transaction that stored new
-- visits appends one row here just before it commits: `seq` comes from the one row of
-- visit_feed_clock, updated in the same transaction, so a later seq is never visible before an
-- earlier one (docs/ARCHITECTURE.md, "Click webhooks and the visit feed"). Times are Unix ms.
CREATE TABLE visit_feed_clock (
    id  INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
    seq INTEGER NOT NULL
);
INSERT INTO visit_feed_clock (id, seq) VALUES (1, 0);

CREATE TABLE visit_feed (
    seq          INTEGER PRIMARY KEY NOT NULL,
    committed_ms INTEGER NOT NULL,
    -- The visits' event ids in the order they were written, one per line.
    event_ids    TEXT NOT NULL
);
-- Replay from a time; retention.
CREATE INDEX visit_feed_committed ON visit_feed (committed_ms);
