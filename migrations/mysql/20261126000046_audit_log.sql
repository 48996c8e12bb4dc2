-- The audit log (issue 53): see the SQLite migration of the same number. Binary collation: the
-- hash covers the stored bytes, and the action filter's prefix range compares bytes.
CREATE TABLE audit_log (
    id              BIGINT NOT NULL AUTO_INCREMENT,
    workspace_id    BIGINT NOT NULL DEFAULT 1,
    seq             BIGINT NOT NULL,
    at_ms           BIGINT NOT NULL,
    actor_kind      VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    actor_id        BIGINT NULL,
    actor_name      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    action          VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    object          VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    changes         MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    request_id      VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    client_addr     VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    batch_size      BIGINT NULL,
    idempotency_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    prev_hash       CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    hash            CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY audit_log_seq (workspace_id, seq),
    KEY audit_log_workspace (workspace_id, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE audit_heads (
    workspace_id    BIGINT NOT NULL,
    last_seq        BIGINT NOT NULL,
    last_hash       CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    anchor_seq      BIGINT NOT NULL,
    anchor_hash     CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    PRIMARY KEY (workspace_id)
) ENGINE = InnoDB;
INSERT INTO audit_heads (workspace_id, last_seq, last_hash, anchor_seq, anchor_hash) VALUES
    (1, 0, '0000000000000000000000000000000000000000000000000000000000000000',
     0, '0000000000000000000000000000000000000000000000000000000000000000');
