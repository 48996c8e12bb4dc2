-- A workspace's audit rows are listed in chain order on `(workspace_id, seq)`, which orders
-- them as their ids do (a chain's appends are serialised): the index of ids per workspace cost
-- every create, single or batched, one more B-tree write for no query.
DROP INDEX audit_log_workspace ON audit_log;
