-- PostgreSQL and MariaDB drop the workspace foreign keys of delivery_receipts and
-- delivery_messages here (their check was 35-45% of a receipt insert). SQLite can drop a
-- foreign key only by rebuilding the table, and checks it inside the sidecar's own process at
-- a cost its batch ingest does not notice; the reference stays. Nothing to do.
SELECT 1;
