-- Workspaces (issue 53): an installation serves several brands or clients, each owning its links,
-- webhook subscriptions and API keys. An existing installation becomes the one workspace
-- `default` (id 1): every link, subscription and key is its, so nothing it does changes.
-- `slug` is what nginx's host map and the link records name, so it never changes; `name` is the
-- label people see and may. Quotas are NULL for "the installation's default" (a setting).
-- SQLite cannot add a column with a REFERENCES clause and a non-NULL default: the links' and
-- subscriptions' workspace is kept right by the sidecar, which deletes a workspace's rows first.
CREATE TABLE workspaces (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    slug               TEXT NOT NULL UNIQUE
        CHECK (length(slug) BETWEEN 1 AND 32 AND slug NOT GLOB '*[^a-z0-9-]*' AND slug NOT GLOB '-*'),
    name               TEXT NOT NULL,
    created_at         TEXT NOT NULL,
    suspended_at       TEXT,
    links_per_day      INTEGER CHECK (links_per_day >= 0),
    compose_recipients INTEGER CHECK (compose_recipients >= 0),
    webhooks           INTEGER CHECK (webhooks >= 0)
);
INSERT INTO workspaces (id, slug, name, created_at)
    VALUES (1, 'default', 'default', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));

-- Every listing, count and export is of one workspace: the workspace leads each index they use.
ALTER TABLE links ADD COLUMN workspace_id INTEGER NOT NULL DEFAULT 1;
DROP INDEX links_created_at;
CREATE INDEX links_workspace_created_at ON links (workspace_id, created_at DESC, code DESC);
DROP INDEX links_campaign;
CREATE INDEX links_workspace_campaign ON links (workspace_id, campaign, created_at DESC, code DESC)
    WHERE campaign IS NOT NULL;
DROP INDEX links_recipient_ref;
CREATE INDEX links_workspace_recipient_ref ON links (workspace_id, recipient_ref)
    WHERE recipient_ref IS NOT NULL;
CREATE INDEX links_workspace_code ON links (workspace_id, code);

-- A key acts in one workspace; an `operator` key manages workspaces and acts in none (NULL).
-- Per-key rate limits: NULL for the installation's default. A wider CHECK needs a new table
-- (ids kept; nothing references api_keys).
CREATE TABLE api_keys_workspaces (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    name            TEXT NOT NULL,
    -- SHA-256 (hex) of the key; the key itself is never stored.
    key_hash        TEXT NOT NULL UNIQUE,
    created_at      TEXT NOT NULL,
    revoked_at      TEXT,
    role            TEXT NOT NULL DEFAULT 'admin'
        CHECK (role IN ('admin', 'issuer', 'viewer', 'resolve', 'operator')),
    workspace_id    INTEGER REFERENCES workspaces (id),
    rate_per_second INTEGER CHECK (rate_per_second >= 0),
    rate_burst      INTEGER CHECK (rate_burst >= 1),
    CHECK ((role = 'operator') = (workspace_id IS NULL))
);
INSERT INTO api_keys_workspaces (id, name, key_hash, created_at, revoked_at, role, workspace_id)
    SELECT id, name, key_hash, created_at, revoked_at, role, 1 FROM api_keys;
DROP TABLE api_keys;
ALTER TABLE api_keys_workspaces RENAME TO api_keys;
CREATE INDEX api_keys_workspace ON api_keys (workspace_id, id);

ALTER TABLE webhook_subscriptions ADD COLUMN workspace_id INTEGER NOT NULL DEFAULT 1;
CREATE INDEX webhook_subscriptions_workspace ON webhook_subscriptions (workspace_id, id);
