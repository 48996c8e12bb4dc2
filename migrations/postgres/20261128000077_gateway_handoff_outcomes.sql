-- What a hand-off came to, as shortlink understood it (issue 77, docs/DELIVERIES.md "Sending
-- through Kannel"): a gateway's body is never kept or shown again.
--
-- `answer` now holds shortlink's own fixed description of the outcome. The rows written before
-- held the gateway's body (or a client error's text): blanked here, so no read can show them.
UPDATE gateway_sends SET answer = NULL WHERE outcome IN ('accepted', 'refused', 'failed');
-- The numeric code a Kannel body starts with (`0:`, `3:`, …): the one thing read from a body.
ALTER TABLE gateway_sends ADD COLUMN gateway_code BIGINT;
-- How long one sendsms request may take before its outcome is unknown (100 ms to 60 s).
ALTER TABLE gateway_configs ADD COLUMN timeout_ms BIGINT NOT NULL DEFAULT 10000;
-- Since when the job holds its messages back because its callback base does not answer (NULL
-- while it sends).
ALTER TABLE gateway_jobs ADD COLUMN waiting_ms BIGINT;
