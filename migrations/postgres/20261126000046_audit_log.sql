-- The audit log (issue 53): see the SQLite migration of the same number. "C" collation: the
-- action filter's prefix range compares bytes.
CREATE TABLE audit_log (
    id              BIGSERIAL PRIMARY KEY,
    workspace_id    BIGINT NOT NULL DEFAULT 1,
    seq             BIGINT NOT NULL,
    at_ms           BIGINT NOT NULL,
    actor_kind      TEXT COLLATE "C" NOT NULL,
    actor_id        BIGINT,
    actor_name      TEXT COLLATE "C" NOT NULL,
    action          TEXT COLLATE "C" NOT NULL,
    object          TEXT COLLATE "C" NOT NULL,
    changes         TEXT NOT NULL,
    request_id      TEXT,
    client_addr     TEXT,
    batch_size      BIGINT,
    idempotency_key TEXT,
    prev_hash       TEXT NOT NULL,
    hash            TEXT NOT NULL,
    UNIQUE (workspace_id, seq)
);
CREATE INDEX audit_log_workspace ON audit_log (workspace_id, id);

CREATE TABLE audit_heads (
    workspace_id    BIGINT PRIMARY KEY,
    last_seq        BIGINT NOT NULL,
    last_hash       TEXT NOT NULL,
    anchor_seq      BIGINT NOT NULL,
    anchor_hash     TEXT NOT NULL
);
INSERT INTO audit_heads (workspace_id, last_seq, last_hash, anchor_seq, anchor_hash) VALUES
    (1, 0, '0000000000000000000000000000000000000000000000000000000000000000',
     0, '0000000000000000000000000000000000000000000000000000000000000000');
