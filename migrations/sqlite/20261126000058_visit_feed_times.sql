-- The first and last time (Unix ms) of a feed row's visits (see the PostgreSQL migration of the
-- same number: only its visits are partitioned by day; kept here so every backend writes the same).
ALTER TABLE visit_feed ADD COLUMN first_visit_ms INTEGER;
ALTER TABLE visit_feed ADD COLUMN last_visit_ms INTEGER;
