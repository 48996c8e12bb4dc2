-- Batch issuance (issue 5): the URL-hash lookup key becomes a plain column.
--
-- The index on substr(url_hash, 1, 16) calls a function for every row inserted, and SQLite takes
-- any statement that calls one as able to fail halfway: each multi-row INSERT of a batch then kept
-- a statement journal, a copy of every page it changed (~8% of the write thread's time, perf).
-- The same 16 hex digits stored by the writer and indexed as a column need no function (the
-- insert also says OR IGNORE, so that no NOT NULL or CHECK constraint can abort it either).
ALTER TABLE links ADD COLUMN url_prefix TEXT;
UPDATE links SET url_prefix = substr(url_hash, 1, 16);
DROP INDEX links_url_hash_prefix;
CREATE INDEX links_url_prefix ON links (url_prefix) WHERE revoked_at IS NULL;
