-- The console's search (issue 80): any part of a link's code, target, recipient reference,
-- campaign or tags, case-insensitive, without reading every link. A pg_trgm GIN index over the
-- five fields, lowercased, answers `LIKE '%x%'` for 3 characters or more from the index (the
-- planner rechecks the few rows it finds). No trigger: PostgreSQL keeps an expression index
-- itself, and a click's visit_count update leaves it alone (HOT updates when no indexed
-- expression changes). pg_trgm ships with PostgreSQL (contrib) and is a trusted extension:
-- the database's owner may create it.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX links_search ON links USING GIN ((lower(
    code || ' ' || target || ' ' || coalesce(recipient_ref, '') || ' ' ||
    coalesce(campaign, '') || ' ' || coalesce(tags::text, '')
)) gin_trgm_ops);
