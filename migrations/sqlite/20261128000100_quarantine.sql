-- Quarantine after the fact (issue 79): see the PostgreSQL migration of the same number.
ALTER TABLE links ADD COLUMN target_host TEXT;
ALTER TABLE links ADD COLUMN quarantined_at TEXT;
CREATE INDEX links_target_host ON links (target_host, code);

CREATE TABLE link_quarantines (
    code            TEXT PRIMARY KEY NOT NULL,
    workspace_id    INTEGER NOT NULL,
    feed            TEXT NOT NULL,
    entry           TEXT NOT NULL,
    quarantined_at  TEXT NOT NULL,
    released_at     TEXT,
    released_by     TEXT
);
CREATE INDEX link_quarantines_feed ON link_quarantines (feed);
CREATE INDEX link_quarantines_workspace ON link_quarantines (workspace_id, quarantined_at DESC);
