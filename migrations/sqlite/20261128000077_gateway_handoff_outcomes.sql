-- What a hand-off came to (issue 77): see the PostgreSQL migration of the same number.
UPDATE gateway_sends SET answer = NULL WHERE outcome IN ('accepted', 'refused', 'failed');
ALTER TABLE gateway_sends ADD COLUMN gateway_code INTEGER;
ALTER TABLE gateway_configs ADD COLUMN timeout_ms INTEGER NOT NULL DEFAULT 10000;
ALTER TABLE gateway_jobs ADD COLUMN waiting_ms INTEGER;
