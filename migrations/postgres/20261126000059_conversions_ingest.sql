-- Conversions ingest on PostgreSQL (issue 54, docs/CONVERSIONS.md "Cost"): less work per
-- conversion for the database, measured per statement (bench/results/conversions-2026-11-26.md,
-- run 5). The results read the same counts as before.

-- The sidecar's sessions bound statements (10 s): not this one's, which copies every converter.
SET LOCAL statement_timeout = 0;

-- The converting-visitor set: one row per visitor of an arm, with the names they converted
-- under, instead of a row per name and one for every name together. A conversion writes one row
-- (or adds its name to the row) where it wrote two: the visitor is new to the arm when its row
-- is new, new to a name when the row did not have it. The row's lock (insert or update) makes a
-- concurrent writer of the same visitor wait and then see it, as the unique key of the two rows
-- did, so the counts in ab_conversions stay exact.
CREATE TABLE ab_converters_by_visitor (
    code    TEXT COLLATE "C" NOT NULL,
    rule    TEXT COLLATE "C" NOT NULL,
    visitor BYTEA NOT NULL,
    names   TEXT[] NOT NULL,
    PRIMARY KEY (code, rule, visitor)
);
INSERT INTO ab_converters_by_visitor (code, rule, visitor, names)
SELECT code, rule, visitor,
    COALESCE(array_agg(name ORDER BY name) FILTER (WHERE name <> ''), '{}')
FROM ab_converters GROUP BY code, rule, visitor;
DROP TABLE ab_converters;
ALTER TABLE ab_converters_by_visitor RENAME TO ab_converters;
ALTER INDEX ab_converters_by_visitor_pkey RENAME TO ab_converters_pkey;

-- Conversions by campaign: only retention's delete of a campaign's old conversions read this
-- index (a daily job, which can read the workspace's rows instead); every conversion paid for
-- it. The other indexes stay: the primary key (the feed reads conversions by id), the unique
-- (workspace_id, event_id) (idempotency) and (workspace_id, code, rule) (an erase, a subject's
-- conversions).
DROP INDEX conversions_campaign;
