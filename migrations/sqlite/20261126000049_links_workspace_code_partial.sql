-- The code-order index of a workspace's links (issue 53) only for workspaces other than the
-- default: an installation without workspaces (every link the default's) then maintains no index
-- beyond those it had before, and a single create or a batch writes one B-tree less per link. The
-- default's code-order scans (export, deletion pages) take the primary key, skipping other
-- workspaces' rows; the store names `workspace_id <> 1` in the others' scans so the planner may
-- take this index for them.
DROP INDEX links_workspace_code;
CREATE INDEX links_workspace_code ON links (workspace_id, code) WHERE workspace_id <> 1;
