-- Batch issuance (issue 5, throughput) and idempotency-key retention.

-- The URL-hash index holds the hash's first 16 hex digits instead of all 64: a quarter of the size,
-- so inserts of random hashes dirty far fewer pages per transaction. find_live_link compares the
-- full hash on the rows the prefix finds.
DROP INDEX links_url_hash_unrevoked;
CREATE INDEX links_url_hash_prefix ON links (substr(url_hash, 1, 16)) WHERE revoked_at IS NULL;

-- Idempotency keys are pruned after --idempotency-retention, oldest first.
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
