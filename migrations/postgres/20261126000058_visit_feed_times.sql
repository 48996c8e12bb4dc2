-- The first and last time (Unix ms) of a feed row's visits: a reader of its ids then looks only
-- at those days of the visits table partitioned by day (migration 54), not at every day's index.
-- Rows written before, and rows of conversions, have none.
ALTER TABLE visit_feed ADD COLUMN first_visit_ms BIGINT, ADD COLUMN last_visit_ms BIGINT;
