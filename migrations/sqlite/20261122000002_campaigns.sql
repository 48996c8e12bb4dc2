-- Campaign-scale issuance (issue 5): per-recipient metadata, idempotency keys, batch slots.

-- Caller metadata: the campaign, an opaque recipient reference, free tags (a JSON array of
-- strings, NULL for none).
ALTER TABLE links ADD COLUMN campaign TEXT;
ALTER TABLE links ADD COLUMN recipient_ref TEXT;
ALTER TABLE links ADD COLUMN tags TEXT;
-- The request (idempotency_keys.id) and item index that created the link, for requests sent with
-- an Idempotency-Key: a retry finds the items already committed instead of creating them again.
ALTER TABLE links ADD COLUMN batch_id INTEGER;
ALTER TABLE links ADD COLUMN batch_index INTEGER;

CREATE UNIQUE INDEX links_batch_slot ON links (batch_id, batch_index) WHERE batch_id IS NOT NULL;
-- Filters and per-campaign aggregation.
CREATE INDEX links_campaign ON links (campaign, created_at DESC, code DESC) WHERE campaign IS NOT NULL;
CREATE INDEX links_recipient_ref ON links (recipient_ref) WHERE recipient_ref IS NOT NULL;

-- One row per Idempotency-Key and API key (0 for the command line). request_hash is the SHA-256 of
-- the request's kind and its first items: the same key with another request is refused.
CREATE TABLE idempotency_keys (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    api_key_id   INTEGER NOT NULL,
    key          TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    UNIQUE (api_key_id, key)
);
