-- Delivery receipts (issue 68, docs/DELIVERIES.md): what an SMS gateway reported of each message
-- carrying a link. Times are Unix milliseconds, as the conversions'. No phone number is stored:
-- a gateway's destination is dropped on arrival.
--
-- One row per (workspace, gateway message id, state): the same report again is a no-op answered
-- as a duplicate (the primary key), and a message's path (submitted, buffered, delivered) stays
-- readable.
CREATE TABLE delivery_receipts (
    workspace_id BIGINT NOT NULL CONSTRAINT delivery_receipts_workspace REFERENCES workspaces (id),
    message_id   TEXT COLLATE "C" NOT NULL,
    state        TEXT COLLATE "C" NOT NULL CONSTRAINT delivery_receipts_state CHECK (state IN
        ('submitted', 'delivered', 'failed', 'rejected', 'expired', 'buffered', 'unknown')),
    code         TEXT COLLATE "C" NOT NULL,
    gateway      TEXT COLLATE "C" NOT NULL,
    error_code   TEXT,
    error_text   TEXT,
    carrier      TEXT,
    at_ms        BIGINT NOT NULL,
    received_ms  BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, message_id, state)
);
-- A link's receipts: a subject's export and erase, a deleted workspace's links.
CREATE INDEX delivery_receipts_code ON delivery_receipts (workspace_id, code);
-- Retention by time.
CREATE INDEX delivery_receipts_received ON delivery_receipts (received_ms);

-- Each message's current state, what the funnel counts: a final state (delivered, failed,
-- rejected, expired) supersedes a non-final one, never the other way round; among finals the
-- later gateway time wins. Kept beside the receipts so the funnel reads one row per message.
CREATE TABLE delivery_messages (
    workspace_id BIGINT NOT NULL CONSTRAINT delivery_messages_workspace REFERENCES workspaces (id),
    message_id   TEXT COLLATE "C" NOT NULL,
    code         TEXT COLLATE "C" NOT NULL,
    -- The host of the short URL a receipt named, when one did (links do not store it).
    short_domain TEXT,
    state        TEXT COLLATE "C" NOT NULL,
    error_code   TEXT,
    carrier      TEXT,
    at_ms        BIGINT NOT NULL,
    received_ms  BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, message_id)
);
CREATE INDEX delivery_messages_code ON delivery_messages (workspace_id, code);
CREATE INDEX delivery_messages_received ON delivery_messages (received_ms);

-- Callback tokens: the credential in the path of a gateway's callback URL (gateways that cannot
-- send a bearer header). Only the SHA-256 of the token is kept, as for API keys. Twilio's auth
-- token is kept as given: the signature check needs the key itself.
CREATE TABLE callback_tokens (
    id                TEXT COLLATE "C" PRIMARY KEY,
    workspace_id      BIGINT NOT NULL CONSTRAINT callback_tokens_workspace REFERENCES workspaces (id),
    name              TEXT NOT NULL,
    gateway           TEXT COLLATE "C" NOT NULL,
    token_hash        TEXT COLLATE "C" NOT NULL UNIQUE,
    twilio_auth_token TEXT,
    created_ms        BIGINT NOT NULL,
    revoked_ms        BIGINT
);
CREATE INDEX callback_tokens_workspace ON callback_tokens (workspace_id, created_ms);
