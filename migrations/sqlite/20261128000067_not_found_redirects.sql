-- Not-found redirects (issue 70): see the PostgreSQL migration of the same number.
CREATE TABLE not_found_redirects (
    workspace_id INTEGER NOT NULL REFERENCES workspaces (id),
    domain       TEXT NOT NULL,
    root_url     TEXT,
    unknown_url  TEXT,
    expired_url  TEXT,
    updated_ms   INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, domain)
);
