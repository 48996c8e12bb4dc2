-- Conversions ingest (issue 54): see the PostgreSQL migration of the same number. There the
-- converting-visitor set became one row per visitor of an arm and the index of conversions by
-- campaign was dropped, for the ingest rate the issue asks of PostgreSQL. Here both stay as
-- they are: the rollup code writes this backend's two rows per conversion
-- (`sidecar/crates/visits/src/conversions/rollup.rs`), and MariaDB's DELETE locks every row it
-- reads, so retention's delete of a campaign's conversions keeps its index.
SELECT 1;
