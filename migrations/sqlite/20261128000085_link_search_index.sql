-- The console's search (issue 80) on SQLite, indexed off the write path. An FTS5 trigram index
-- kept by triggers made every insert of a link about six times slower (migration 81), so no
-- trigger touches a create: the sidecar's search indexer (store/src/sqlite/search_index.rs) adds
-- new links to the index in small steps while the writer is otherwise idle, in rowid order up to
-- `link_search_progress.last_rowid`. A change of an indexed field (target, ref, campaign, tags)
-- or a deleted link only notes its rowid in `link_search_dirty` (one small insert on an update,
-- which is rarer than a create by far), and the indexer writes its entry again. The search reads
-- the index for what it holds and `LIKE`s the rest (links past the progress mark, noted ones).
-- Contentless (no copy of the text) with contentless_delete, so an entry can be removed by
-- rowid alone (SQLite 3.43+; the bundled SQLite is 3.46).
CREATE VIRTUAL TABLE link_search USING fts5(
    text, tokenize = 'trigram', content = '', contentless_delete = 1
);
-- A removed entry's tokens go at once, not at the next merge: an erased recipient's ref
-- (docs/PRIVACY.md) must leave nothing of itself in the index either (SQLite 3.44+).
INSERT INTO link_search (link_search, rank) VALUES ('secure-delete', 1);
CREATE TABLE link_search_progress (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    last_rowid INTEGER NOT NULL
);
INSERT INTO link_search_progress (id, last_rowid) VALUES (1, 0);
CREATE TABLE link_search_dirty (link_rowid INTEGER PRIMARY KEY);
CREATE TRIGGER link_search_changed AFTER UPDATE OF target, recipient_ref, campaign, tags ON links
BEGIN
    INSERT OR IGNORE INTO link_search_dirty (link_rowid) VALUES (old.rowid);
END;
CREATE TRIGGER link_search_deleted AFTER DELETE ON links
BEGIN
    INSERT OR IGNORE INTO link_search_dirty (link_rowid) VALUES (old.rowid);
END;
