-- Scanners apart from previews in the rollups (issue 78): see the PostgreSQL migration of the same
-- number.
ALTER TABLE visit_buckets ADD COLUMN scanners BIGINT NOT NULL DEFAULT 0;
ALTER TABLE visit_agents ADD COLUMN scanners BIGINT NOT NULL DEFAULT 0;
ALTER TABLE visit_places ADD COLUMN scanners BIGINT NOT NULL DEFAULT 0;
ALTER TABLE visit_sources ADD COLUMN scanners BIGINT NOT NULL DEFAULT 0;
ALTER TABLE domain_clicks ADD COLUMN scanners BIGINT NOT NULL DEFAULT 0;
