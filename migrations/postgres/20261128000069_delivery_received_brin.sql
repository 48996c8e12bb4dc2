-- The receipts' and messages' time of arrival is read only by retention, which deletes by range
-- (`received_ms < ?`), and rows arrive in that order: a BRIN index (one summary per 128 pages)
-- serves that read, where the B-tree took an entry per row written, on the ingest's path
-- (bench/results/deliveries-2026-11-28c.md).
DROP INDEX delivery_receipts_received;
CREATE INDEX delivery_receipts_received ON delivery_receipts USING BRIN (received_ms);
DROP INDEX delivery_messages_received;
CREATE INDEX delivery_messages_received ON delivery_messages USING BRIN (received_ms);
