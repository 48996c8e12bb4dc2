-- Links imported from another shortener (issue 40): see the SQLite migration of the same number.
CREATE TABLE imported_links (
    code            TEXT COLLATE "C" PRIMARY KEY,
    source          TEXT NOT NULL,
    domain          TEXT NOT NULL,
    source_target   TEXT NOT NULL,
    title           TEXT,
    source_visits   BIGINT NOT NULL DEFAULT 0,
    imported_at_ms  BIGINT NOT NULL
);
CREATE INDEX imported_links_source ON imported_links (source, code);
