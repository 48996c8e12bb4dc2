-- The console's search (issue 80) has no index on SQLite: an FTS5 trigram index kept by triggers
-- made every insert of a link about six times slower (100,000 links in one statement: 6.0 s
-- against 1.0 s), which the batch create, the product's hot write path, cannot afford. The search
-- reads the workspace's links instead (docs/DEPLOYMENT.md, "The console's link search"). This
-- migration is kept, empty, so that each backend's list of migrations has the same numbers.
SELECT 1;
