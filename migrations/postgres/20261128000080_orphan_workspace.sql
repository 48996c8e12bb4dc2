-- Orphan visits carry their workspace from the edge (issue 77): the module records the workspace
-- nginx maps the host to (`ws`), the consumer stores it, and every read scopes by it, so whose an
-- orphan visit is never depends on what a sidecar has learned of the hosts since it started.
-- '' is nobody's: rows stored before this change, and events of a module that did not record a
-- workspace (an older module during an upgrade, a host mapped to none); only the operator's key
-- reads them. Counts are kept per workspace and host, so a host that moves to another workspace
-- leaves its old totals with the old workspace.
ALTER TABLE orphan_visits ADD COLUMN workspace VARCHAR(32) NOT NULL DEFAULT '';
CREATE INDEX orphan_visits_workspace_time ON orphan_visits (workspace, at_ms);
CREATE TABLE orphan_workspace_counts (
    workspace VARCHAR(32) NOT NULL,
    domain VARCHAR(255) NOT NULL,
    kind VARCHAR(32) NOT NULL,
    visits BIGINT NOT NULL,
    PRIMARY KEY (workspace, domain, kind)
);
INSERT INTO orphan_workspace_counts (workspace, domain, kind, visits)
    SELECT '', domain, kind, visits FROM orphan_counts;
DROP TABLE orphan_counts;
ALTER TABLE orphan_workspace_counts RENAME TO orphan_counts;
