-- The console's search (issue 80): any part of a link's code, target, recipient reference,
-- campaign or tags, case-insensitive, without reading every link. An FTS5 index with the trigram
-- tokenizer answers a substring of 3 characters or more from its index (a `LIKE '%x%'` over
-- `links` reads every row). External content: the text stays in `links`, the index holds only
-- trigrams, kept by the triggers below (only the five columns' changes touch it, not a click's
-- visit_count). It is keyed by `links`' rowid, which a VACUUM may renumber (the table has no
-- INTEGER PRIMARY KEY): after one, `INSERT INTO links_search(links_search) VALUES ('rebuild')`.
CREATE VIRTUAL TABLE links_search USING fts5(
    code, target, recipient_ref, campaign, tags,
    content = 'links', tokenize = 'trigram'
);
INSERT INTO links_search(links_search) VALUES ('rebuild');

CREATE TRIGGER links_search_insert AFTER INSERT ON links BEGIN
    INSERT INTO links_search(rowid, code, target, recipient_ref, campaign, tags)
    VALUES (new.rowid, new.code, new.target, new.recipient_ref, new.campaign, new.tags);
END;
CREATE TRIGGER links_search_delete AFTER DELETE ON links BEGIN
    INSERT INTO links_search(links_search, rowid, code, target, recipient_ref, campaign, tags)
    VALUES ('delete', old.rowid, old.code, old.target, old.recipient_ref, old.campaign, old.tags);
END;
CREATE TRIGGER links_search_update AFTER UPDATE OF code, target, recipient_ref, campaign, tags
ON links BEGIN
    INSERT INTO links_search(links_search, rowid, code, target, recipient_ref, campaign, tags)
    VALUES ('delete', old.rowid, old.code, old.target, old.recipient_ref, old.campaign, old.tags);
    INSERT INTO links_search(rowid, code, target, recipient_ref, campaign, tags)
    VALUES (new.rowid, new.code, new.target, new.recipient_ref, new.campaign, new.tags);
END;
