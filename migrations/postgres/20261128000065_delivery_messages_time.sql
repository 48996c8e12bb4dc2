-- The console's Domains charts (issue 70) read a workspace's messages by the time of their final
-- report over the domain health window: this index bounds that read by the window's messages,
-- where the (workspace_id, code) index would read every message the workspace ever had.
CREATE INDEX delivery_messages_time ON delivery_messages (workspace_id, at_ms);
