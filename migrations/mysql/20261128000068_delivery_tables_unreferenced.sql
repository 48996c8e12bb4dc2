-- As on PostgreSQL: receipts and their messages hold their workspace's id as visits do, without
-- a foreign key (its check was 35-45% of a receipt insert); a workspace's deletion deletes them.
ALTER TABLE delivery_receipts DROP FOREIGN KEY delivery_receipts_workspace;
ALTER TABLE delivery_messages DROP FOREIGN KEY delivery_messages_workspace;
