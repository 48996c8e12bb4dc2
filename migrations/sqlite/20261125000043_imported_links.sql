-- Links imported from another shortener (issue 40): where each came from, so that running an
-- import again recognises its own links ("already imported") and tells them from a collision
-- with a link of ours or of another source, and so that `verify-import` can replay them. One row
-- per code: `sl:c:<code>` is one keyspace over every pool domain, so a code is imported once.
-- Times are Unix milliseconds on every backend (nothing but the importer reads them).
CREATE TABLE imported_links (
    code            TEXT PRIMARY KEY NOT NULL,
    -- yourls, shlink, kutt, bitly or csv
    source          TEXT NOT NULL,
    -- The domain the code was sent on ('' when the source does not say).
    domain          TEXT NOT NULL,
    -- The target as the source had it, before our normalisation (what verify-import expects).
    source_target   TEXT NOT NULL,
    title           TEXT,
    -- The source's own visit total (individual visits, where it had them, are in `visits`).
    source_visits   INTEGER NOT NULL DEFAULT 0,
    imported_at_ms  INTEGER NOT NULL
);
CREATE INDEX imported_links_source ON imported_links (source, code);
