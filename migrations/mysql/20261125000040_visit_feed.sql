-- The visit feed (issue 36): the order in which stored visits are handed out, by the resumable
-- feed (GET /api/v1/visits) and the click webhooks. Each visit write transaction that stored new
-- visits appends one row here just before it commits: `seq` comes from the one row of
-- visit_feed_clock, updated (row-locked) in the same transaction, so concurrent consumers commit
-- their rows in seq order and a later seq is never visible before an earlier one
-- (docs/ARCHITECTURE.md, "Click webhooks and the visit feed"). Times are Unix ms.
CREATE TABLE visit_feed_clock (
    id  SMALLINT NOT NULL PRIMARY KEY CHECK (id = 1),
    seq BIGINT NOT NULL
) ENGINE = InnoDB;
INSERT INTO visit_feed_clock (id, seq) VALUES (1, 0);

CREATE TABLE visit_feed (
    seq          BIGINT NOT NULL PRIMARY KEY,
    committed_ms BIGINT NOT NULL,
    -- The visits' event ids in the order they were written, one per line.
    event_ids    LONGTEXT CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    KEY visit_feed_committed (committed_ms)
) ENGINE = InnoDB;
