-- PostgreSQL makes the delivery tables' received_ms indexes BRIN here. InnoDB has no BRIN, and
-- its receipts' ingest goes one chunk at a time, not measured against the issue's target: the
-- B-trees stay. Nothing to do.
SELECT 1;
