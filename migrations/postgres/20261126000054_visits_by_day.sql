-- Raw visits partitioned by day (issue 56, docs/DEPLOYMENT.md "Visits partitioned by day"):
-- retention drops a whole day's partition instead of deleting its rows one by one (which bloated
-- the table and its indexes and fought the consumer's inserts), and a query bounded by time reads
-- only the days it covers. PostgreSQL only: SQLite and MariaDB keep one table.
--
-- The partition key is `visited_at`, the visit's time as the redirect recorded it: a redelivered
-- stream entry carries the same time, so it lands in the same partition and the primary key
-- (event_id, visited_at) still refuses it (every unique index of a partitioned table must hold
-- the key). A lookup by id alone (the feed, conversions) reads each partition's index.
--
-- Days are UTC days, named visits_pYYYYMMDD. The cleanup job keeps today and the next 7 days
-- created (`shortlink_visits::store::PgVisitStore::prepare_days`); a visit of a day without its
-- partition (a clock far off, a day older than those created here) goes to visits_default and is
-- moved into its day's partition if that day is created later.
--
-- An existing table is converted here, in this migration's one transaction: the visits are copied
-- into the new table, then the old one is dropped. Redirects go on meanwhile (nginx writes to
-- Redis); the consumer's writes wait on the table's lock, and the visits wait in the stream.
-- Measured time per million visits: docs/DEPLOYMENT.md.

-- The sidecar's sessions bound statements (10 s) and lock waits: not this one's. Days are UTC
-- days whatever the server's time zone.
SET LOCAL statement_timeout = 0;
SET LOCAL lock_timeout = '60s';
SET LOCAL timezone = 'UTC';

ALTER TABLE visits RENAME TO visits_unpartitioned;

-- The same columns, in the same order (the consumer's COPY names them; `SELECT *` below).
CREATE TABLE visits (LIKE visits_unpartitioned INCLUDING DEFAULTS) PARTITION BY RANGE (visited_at);

-- A partition per day that holds visits, back to 400 days (older ones go to the default
-- partition: an installation keeping visits for years gets no thousands of partitions), and
-- one per day from yesterday to 7 days ahead.
DO $$
DECLARE
    today timestamptz := date_trunc('day', now());
    day timestamptz;
BEGIN
    FOR day IN
        SELECT d FROM generate_series(today - interval '400 days', today - interval '2 days',
                                      interval '1 day') AS d
        WHERE EXISTS (SELECT 1 FROM visits_unpartitioned
                      WHERE visited_at >= d AND visited_at < d + interval '1 day')
        UNION ALL
        SELECT generate_series(today - interval '1 day', today + interval '7 days',
                               interval '1 day')
    LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF visits FOR VALUES FROM (%L) TO (%L)',
                       'visits_p' || to_char(day, 'YYYYMMDD'), day, day + interval '1 day');
    END LOOP;
END
$$;
CREATE TABLE visits_default PARTITION OF visits DEFAULT;

INSERT INTO visits SELECT * FROM visits_unpartitioned;
DROP TABLE visits_unpartitioned;

-- Indexes built once over the copied rows (cheaper than row by row), on every partition.
ALTER TABLE visits ADD PRIMARY KEY (event_id, visited_at);
CREATE INDEX visits_code_time ON visits (code, visited_at);
CREATE INDEX visits_visited_at ON visits USING brin (visited_at);
ANALYZE visits;
