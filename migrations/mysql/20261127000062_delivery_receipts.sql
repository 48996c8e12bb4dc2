-- Delivery receipts (issue 68): see the PostgreSQL migration of the same number. Times are Unix ms.
-- Key columns are VARCHARs sized to InnoDB's 3072-byte keys; the API bounds every text.
CREATE TABLE delivery_receipts (
    workspace_id BIGINT NOT NULL,
    message_id   VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    state        VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    code         VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    gateway      VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    error_code   VARCHAR(32) NULL,
    error_text   VARCHAR(256) NULL,
    carrier      VARCHAR(64) NULL,
    at_ms        BIGINT NOT NULL,
    received_ms  BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, message_id, state),
    CONSTRAINT delivery_receipts_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    CONSTRAINT delivery_receipts_state CHECK (state IN
        ('submitted', 'delivered', 'failed', 'rejected', 'expired', 'buffered', 'unknown')),
    KEY delivery_receipts_code (workspace_id, code),
    KEY delivery_receipts_received (received_ms)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE delivery_messages (
    workspace_id BIGINT NOT NULL,
    message_id   VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    code         VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    short_domain VARCHAR(253) NULL,
    state        VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    error_code   VARCHAR(32) NULL,
    carrier      VARCHAR(64) NULL,
    at_ms        BIGINT NOT NULL,
    received_ms  BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, message_id),
    CONSTRAINT delivery_messages_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    KEY delivery_messages_code (workspace_id, code),
    KEY delivery_messages_received (received_ms)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE callback_tokens (
    id                VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    workspace_id      BIGINT NOT NULL,
    name              VARCHAR(200) NOT NULL,
    gateway           VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    token_hash        CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    twilio_auth_token VARCHAR(256) NULL,
    created_ms        BIGINT NOT NULL,
    revoked_ms        BIGINT NULL,
    CONSTRAINT callback_tokens_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    UNIQUE KEY callback_tokens_hash (token_hash),
    KEY callback_tokens_workspace_created (workspace_id, created_ms)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
