-- Workspaces (issue 53): an installation serves several brands or clients, each owning its links,
-- webhook subscriptions and API keys. An existing installation becomes the one workspace
-- `default` (id 1): every link, subscription and key is its, so nothing it does changes.
-- `slug` is what nginx's host map and the link records name, so it never changes; `name` is the
-- label people see and may. Quotas are NULL for "the installation's default" (a setting).
CREATE TABLE workspaces (
    id                 BIGSERIAL PRIMARY KEY,
    slug               TEXT COLLATE "C" NOT NULL UNIQUE
        CONSTRAINT workspaces_slug CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,31}$'),
    name               TEXT NOT NULL,
    created_at         TIMESTAMPTZ NOT NULL,
    suspended_at       TIMESTAMPTZ,
    links_per_day      BIGINT CHECK (links_per_day >= 0),
    compose_recipients BIGINT CHECK (compose_recipients >= 0),
    webhooks           BIGINT CHECK (webhooks >= 0)
);
INSERT INTO workspaces (id, slug, name, created_at) VALUES (1, 'default', 'default', now());
SELECT setval(pg_get_serial_sequence('workspaces', 'id'), 1);

-- A constant default: PostgreSQL adds the column without rewriting the table.
ALTER TABLE links ADD COLUMN workspace_id BIGINT NOT NULL DEFAULT 1
    CONSTRAINT links_workspace REFERENCES workspaces (id);
-- Every listing, count and export is of one workspace: the workspace leads each index they use.
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
-- Per-key rate limits: NULL for the installation's default.
ALTER TABLE api_keys ADD COLUMN workspace_id BIGINT
    CONSTRAINT api_keys_workspace REFERENCES workspaces (id);
UPDATE api_keys SET workspace_id = 1;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_role;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_role
    CHECK (role IN ('admin', 'issuer', 'viewer', 'resolve', 'operator'));
ALTER TABLE api_keys ADD CONSTRAINT api_keys_operator_has_no_workspace
    CHECK ((role = 'operator') = (workspace_id IS NULL));
ALTER TABLE api_keys ADD COLUMN rate_per_second BIGINT CHECK (rate_per_second >= 0);
ALTER TABLE api_keys ADD COLUMN rate_burst BIGINT CHECK (rate_burst >= 1);
CREATE INDEX api_keys_workspace ON api_keys (workspace_id, id);

ALTER TABLE webhook_subscriptions ADD COLUMN workspace_id BIGINT NOT NULL DEFAULT 1
    CONSTRAINT webhook_subscriptions_workspace REFERENCES workspaces (id);
CREATE INDEX webhook_subscriptions_workspace ON webhook_subscriptions (workspace_id, id);
