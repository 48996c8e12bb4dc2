-- Not-found redirects (issue 70): see the PostgreSQL migration of the same number. A domain is at
-- most 253 bytes of ASCII; URLs are bounded by the API (shortlink_wire::not_found::MAX_URL_BYTES).
CREATE TABLE not_found_redirects (
    workspace_id BIGINT NOT NULL,
    domain       VARCHAR(253) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    root_url     TEXT NULL,
    unknown_url  TEXT NULL,
    expired_url  TEXT NULL,
    updated_ms   BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, domain),
    CONSTRAINT not_found_redirects_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
