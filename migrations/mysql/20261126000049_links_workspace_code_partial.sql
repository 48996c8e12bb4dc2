-- The code-order index of a workspace's links stays whole on MariaDB, which has no partial
-- indexes (SQLite and PostgreSQL keep it for workspaces other than the default only). Kept as a
-- migration so the three backends' histories have the same numbers.
SELECT 1;
