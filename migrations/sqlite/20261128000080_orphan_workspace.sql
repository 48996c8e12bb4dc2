-- Orphan visits carry their workspace (issue 77): see the PostgreSQL migration of the same number.
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
