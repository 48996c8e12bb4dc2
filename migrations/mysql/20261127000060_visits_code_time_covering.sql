-- The per-rule clicks' covering index (issue 56): see the PostgreSQL migration of the same
-- number. It serves the reads of a day's partition, which only PostgreSQL has; here `visits` is
-- one table and keeps its index.
SELECT 1;
