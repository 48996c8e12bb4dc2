-- A workspace's ceilings on its keys' request rates (issue 66, "Limits that hold"): set by the
-- operator, the highest `rate_per_second` and `rate_burst` an admin of the workspace may give a
-- key, and what every key of the workspace is held to at use (a key stored with more, or with
-- none, is clamped). NULL: no ceiling but the installation's (--api-rate-limit, --api-rate-burst).
ALTER TABLE workspaces ADD COLUMN key_rate_per_second INTEGER CHECK (key_rate_per_second >= 1);
ALTER TABLE workspaces ADD COLUMN key_rate_burst INTEGER CHECK (key_rate_burst >= 1);
