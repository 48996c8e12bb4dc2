-- Delivery receipts (issue 68): see the PostgreSQL migration of the same number. Times are Unix ms.
CREATE TABLE delivery_receipts (
    workspace_id INTEGER NOT NULL REFERENCES workspaces (id),
    message_id   TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN
        ('submitted', 'delivered', 'failed', 'rejected', 'expired', 'buffered', 'unknown')),
    code         TEXT NOT NULL,
    gateway      TEXT NOT NULL,
    error_code   TEXT,
    error_text   TEXT,
    carrier      TEXT,
    at_ms        INTEGER NOT NULL,
    received_ms  INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, message_id, state)
);
CREATE INDEX delivery_receipts_code ON delivery_receipts (workspace_id, code);
CREATE INDEX delivery_receipts_received ON delivery_receipts (received_ms);

CREATE TABLE delivery_messages (
    workspace_id INTEGER NOT NULL REFERENCES workspaces (id),
    message_id   TEXT NOT NULL,
    code         TEXT NOT NULL,
    short_domain TEXT,
    state        TEXT NOT NULL,
    error_code   TEXT,
    carrier      TEXT,
    at_ms        INTEGER NOT NULL,
    received_ms  INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, message_id)
);
CREATE INDEX delivery_messages_code ON delivery_messages (workspace_id, code);
CREATE INDEX delivery_messages_received ON delivery_messages (received_ms);

CREATE TABLE callback_tokens (
    id                TEXT PRIMARY KEY NOT NULL,
    workspace_id      INTEGER NOT NULL REFERENCES workspaces (id),
    name              TEXT NOT NULL,
    gateway           TEXT NOT NULL,
    token_hash        TEXT NOT NULL UNIQUE,
    twilio_auth_token TEXT,
    created_ms        INTEGER NOT NULL,
    revoked_ms        INTEGER
);
CREATE INDEX callback_tokens_workspace ON callback_tokens (workspace_id, created_ms);
