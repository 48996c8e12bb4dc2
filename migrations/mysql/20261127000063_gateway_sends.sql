-- Compose's hand-off to an SMS gateway (issue 68): see the PostgreSQL migration of the same number.
-- Key columns are VARCHARs sized to InnoDB's 3072-byte keys; the API bounds every text.
CREATE TABLE gateway_configs (
    workspace_id  BIGINT NOT NULL PRIMARY KEY,
    kind          VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    url           VARCHAR(2048) NOT NULL,
    username      VARCHAR(128) NOT NULL,
    password_file VARCHAR(255) NOT NULL,
    sender        VARCHAR(32) NOT NULL,
    callback_base VARCHAR(2048) NOT NULL,
    per_second    BIGINT NOT NULL,
    attempts      BIGINT NOT NULL,
    backoff_ms    BIGINT NOT NULL,
    updated_ms    BIGINT NOT NULL,
    CONSTRAINT gateway_configs_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE gateway_jobs (
    id                VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    workspace_id      BIGINT NOT NULL,
    campaign          VARCHAR(200) NULL,
    callback_token_id VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    created_ms        BIGINT NOT NULL,
    finished_ms       BIGINT NULL,
    stopped           VARCHAR(64) NULL,
    CONSTRAINT gateway_jobs_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    KEY gateway_jobs_workspace_created (workspace_id, created_ms)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE gateway_sends (
    workspace_id BIGINT NOT NULL,
    job_id       VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    idx          BIGINT NOT NULL,
    code         VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    message_id   VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    outcome      VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    http_status  BIGINT NULL,
    answer       VARCHAR(256) NULL,
    attempts     BIGINT NOT NULL,
    at_ms        BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, job_id, idx),
    CONSTRAINT gateway_sends_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    KEY gateway_sends_code (workspace_id, code)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
