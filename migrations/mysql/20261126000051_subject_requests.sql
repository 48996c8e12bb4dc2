-- Personal data requests (issue 56): see the PostgreSQL migration of the same number.
CREATE TABLE subject_requests (
    id           VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    workspace_id BIGINT NOT NULL,
    request_key  VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    selector     VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    state        VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    codes        MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    tombstone    VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    links        BIGINT NOT NULL DEFAULT 0,
    visits       BIGINT NOT NULL DEFAULT 0,
    conversions  BIGINT NOT NULL DEFAULT 0,
    created_ms   BIGINT NOT NULL,
    finished_ms  BIGINT NULL,
    UNIQUE KEY subject_requests_key (workspace_id, request_key),
    KEY subject_requests_workspace (workspace_id, created_ms)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
