-- Not-found redirects (issue 70): where a workspace's short domains send the bare root, an unknown
-- code and an expired or revoked link without an expired_url of its own. One row per workspace
-- (domain = '') and per domain of it; NULL: unset (falls through to the workspace, then to today's
-- 404 or 410). Projected to Redis as the hash sl:nf (shortlink_wire::not_found).
CREATE TABLE not_found_redirects (
    workspace_id BIGINT NOT NULL CONSTRAINT not_found_redirects_workspace REFERENCES workspaces (id),
    domain       TEXT COLLATE "C" NOT NULL,
    root_url     TEXT,
    unknown_url  TEXT,
    expired_url  TEXT,
    updated_ms   BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, domain)
);
