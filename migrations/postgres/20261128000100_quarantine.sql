-- Quarantine after the fact (issue 79): when a threat feed adds an entry, the live links whose
-- target it lists are found through `target_host` and quarantined (their record answers the
-- warning page; the link itself is kept).
--
-- `target_host` is the target's host with its labels reversed and a final dot (`www.evil.example`
-- -> `example.evil.www.`), so a feed's host entry and every subdomain of it are one range of the
-- index: `>= 'example.evil.'` and `< 'example.evil/'`. Written by the sidecar with every insert and
-- update; links stored before it are filled in by the sidecar in steps after its start. "C"
-- collation: the range compares bytes.
ALTER TABLE links ADD COLUMN target_host TEXT COLLATE "C";
ALTER TABLE links ADD COLUMN quarantined_at TIMESTAMPTZ;
CREATE INDEX links_target_host ON links (target_host, code);

-- One row per link a feed listed: while `released_at` is NULL the link is quarantined
-- (`links.quarantined_at`); once released, the row remembers the feed and entry the release
-- holds against (a later match on another entry quarantines again). The row goes when the entry
-- leaves its feed.
CREATE TABLE link_quarantines (
    code            TEXT COLLATE "C" PRIMARY KEY,
    workspace_id    BIGINT NOT NULL,
    feed            TEXT COLLATE "C" NOT NULL,
    entry           TEXT COLLATE "C" NOT NULL,
    quarantined_at  TIMESTAMPTZ NOT NULL,
    released_at     TIMESTAMPTZ,
    released_by     TEXT
);
CREATE INDEX link_quarantines_feed ON link_quarantines (feed);
CREATE INDEX link_quarantines_workspace ON link_quarantines (workspace_id, quarantined_at DESC);
