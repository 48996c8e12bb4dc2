-- The console's Domains charts (issue 70): see the PostgreSQL migration of the same number.
CREATE INDEX delivery_messages_time ON delivery_messages (workspace_id, at_ms);
