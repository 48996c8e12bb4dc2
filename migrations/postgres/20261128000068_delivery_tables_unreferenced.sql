-- Receipts and their messages hold their workspace's id as visits do, without a foreign key:
-- the check cost 35-45% of each receipt insert (bench/results/deliveries-2026-11-28b.md), and
-- deleting a workspace deletes its delivery rows itself (sidecar/crates/store/src/sql/workspaces.rs). The id comes
-- from the link or callback token the receipt was matched to, never from the sender.
ALTER TABLE delivery_receipts DROP CONSTRAINT delivery_receipts_workspace;
ALTER TABLE delivery_messages DROP CONSTRAINT delivery_messages_workspace;
