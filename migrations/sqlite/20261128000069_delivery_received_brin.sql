-- PostgreSQL makes the delivery tables' received_ms indexes BRIN here. SQLite has no BRIN: the
-- B-trees stay. Nothing to do.
SELECT 1;
