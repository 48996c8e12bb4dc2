-- A link's per-rule clicks over a window (the stats' `rules`, issue 56) read from the index alone:
-- `visits_code_time` also carries the three columns that read counts (audience, rule, visitor),
-- so a day whose partition is all visible (the cleanup job vacuums each day once it has ended,
-- `PgVisitStore::settle_days`) answers without a visit to its heap. On one heap the same read
-- fetched a page per visit (a link's visits of a day are spread over the whole day's pages); with
-- days partitioned it reads two days' indexes for a 24 h window, which without this cost more
-- than the one index of the table before (bench/results/partitions-2026-11-26.md, runs 8-10).
--
-- Every other lookup by code and time reads the wider index as before. Built once here on every
-- partition (a day created later gets it from `visits`). Redirects go on meanwhile; the
-- consumer's writes wait on the table's lock and the visits wait in the stream: measured time
-- per million visits in docs/DEPLOYMENT.md.
SET LOCAL statement_timeout = 0;
SET LOCAL lock_timeout = '60s';

DROP INDEX visits_code_time;
CREATE INDEX visits_code_time ON visits (code, visited_at) INCLUDE (audience, rule, visitor);
