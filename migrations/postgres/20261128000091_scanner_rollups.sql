-- Scanners apart from previews in the rollups (issue 78): `scanners` counts the visits judged
-- `scanner` (a carrier's or a security service's fetch: docs/BOTS.md), `previews` the messaging
-- apps' previews only. Rows written before it counted scanners under `previews` (the raw visits
-- keep which, for as long as they are kept); they stay as they are.
ALTER TABLE visit_buckets ADD COLUMN scanners BIGINT NOT NULL DEFAULT 0;
ALTER TABLE visit_agents ADD COLUMN scanners BIGINT NOT NULL DEFAULT 0;
ALTER TABLE visit_places ADD COLUMN scanners BIGINT NOT NULL DEFAULT 0;
ALTER TABLE visit_sources ADD COLUMN scanners BIGINT NOT NULL DEFAULT 0;
ALTER TABLE domain_clicks ADD COLUMN scanners BIGINT NOT NULL DEFAULT 0;
