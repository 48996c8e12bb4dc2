-- The audit log (issue 53): one append-only row per change, hash-chained per workspace so that a
-- row deleted, edited or inserted in SQL is found by `shortlink-sidecar audit verify`.
-- Times are Unix milliseconds on every backend, and `changes` is JSON kept as text: the hash
-- covers the stored bytes, so nothing may reformat them (docs/SECURITY.md, "Audit log").
CREATE TABLE audit_log (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    -- No foreign key yet: the workspaces table comes in its own migration.
    workspace_id    INTEGER NOT NULL DEFAULT 1,
    -- The row's place in its workspace's chain: 1, 2, 3 ... with no gap, so a deleted row shows.
    seq             INTEGER NOT NULL,
    at_ms           INTEGER NOT NULL,
    -- key, console, cli or system
    actor_kind      TEXT NOT NULL,
    actor_id        INTEGER,
    actor_name      TEXT NOT NULL,
    action          TEXT NOT NULL,
    object          TEXT NOT NULL,
    changes         TEXT NOT NULL,
    request_id      TEXT,
    client_addr     TEXT,
    batch_size      INTEGER,
    idempotency_key TEXT,
    prev_hash       TEXT NOT NULL,
    hash            TEXT NOT NULL,
    UNIQUE (workspace_id, seq)
);
CREATE INDEX audit_log_workspace ON audit_log (workspace_id, id);

-- Each chain's head (appends of a workspace lock it, so they are serialised) and its anchor: the
-- last row retention deleted (seq 0 and 64 zeros: none), from which the rows left are verified.
CREATE TABLE audit_heads (
    workspace_id    INTEGER PRIMARY KEY NOT NULL,
    last_seq        INTEGER NOT NULL,
    last_hash       TEXT NOT NULL,
    anchor_seq      INTEGER NOT NULL,
    anchor_hash     TEXT NOT NULL
);
INSERT INTO audit_heads (workspace_id, last_seq, last_hash, anchor_seq, anchor_hash) VALUES
    (1, 0, '0000000000000000000000000000000000000000000000000000000000000000',
     0, '0000000000000000000000000000000000000000000000000000000000000000');
