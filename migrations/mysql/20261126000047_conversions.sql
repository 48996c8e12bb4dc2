-- Conversions (issue 54): see the PostgreSQL migration of the same number. Times are Unix ms.
-- Key columns are VARCHARs sized to InnoDB's 3072-byte keys.
CREATE TABLE conversions (
    id           VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    workspace_id BIGINT NOT NULL,
    event_id     VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    visit_id     VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    code         VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    campaign     VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    recipient_ref VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    rule         VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NULL,
    short_domain VARCHAR(253) NULL,
    device       VARCHAR(100) NULL,
    country      VARCHAR(100) NULL,
    visitor      BINARY(16) NOT NULL,
    clicked_ms   BIGINT NOT NULL,
    name         VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    value_minor  BIGINT NULL,
    currency     CHAR(3) CHARACTER SET ascii COLLATE ascii_bin NULL,
    exponent     BIGINT NULL,
    converted_ms BIGINT NOT NULL,
    received_ms  BIGINT NOT NULL,
    CONSTRAINT conversions_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    CONSTRAINT conversions_value CHECK ((value_minor IS NULL) = (currency IS NULL)),
    UNIQUE KEY conversions_event (workspace_id, event_id),
    KEY conversions_code (workspace_id, code, rule),
    KEY conversions_campaign (workspace_id, campaign, rule)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE INDEX visits_code_time ON visits (code, visited_at);
