-- The console's search index on SQLite, kept off the write path (issue 80). This backend's index
-- is migration 81's, kept by the database itself; this file is empty so that each backend's
-- list of migrations has the same numbers.
SELECT 1;
