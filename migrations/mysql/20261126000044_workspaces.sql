-- Workspaces (issue 53): an installation serves several brands or clients, each owning its links,
-- webhook subscriptions and API keys. An existing installation becomes the one workspace
-- `default` (id 1): every link, subscription and key is its, so nothing it does changes.
-- `slug` is what nginx's host map and the link records name, so it never changes; `name` is the
-- label people see and may. Quotas are NULL for "the installation's default" (a setting).
CREATE TABLE workspaces (
    id                 BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    slug               VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    name               TEXT NOT NULL,
    created_at         DATETIME(6) NOT NULL,
    suspended_at       DATETIME(6) NULL,
    links_per_day      BIGINT NULL CHECK (links_per_day >= 0),
    compose_recipients BIGINT NULL CHECK (compose_recipients >= 0),
    webhooks           BIGINT NULL CHECK (webhooks >= 0),
    CONSTRAINT workspaces_slug CHECK (slug REGEXP '^[a-z0-9][a-z0-9-]{0,31}$'),
    UNIQUE KEY workspaces_slug_unique (slug)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
INSERT INTO workspaces (id, slug, name, created_at) VALUES (1, 'default', 'default', UTC_TIMESTAMP(6));

-- Every listing, count and export is of one workspace: the workspace leads each index they use.
ALTER TABLE links
    ADD COLUMN workspace_id BIGINT NOT NULL DEFAULT 1,
    ADD CONSTRAINT links_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    DROP KEY links_created_at,
    ADD KEY links_workspace_created_at (workspace_id, created_at DESC, code DESC),
    DROP KEY links_campaign,
    ADD KEY links_workspace_campaign (workspace_id, campaign, created_at DESC, code DESC),
    DROP KEY links_recipient_ref,
    ADD KEY links_workspace_recipient_ref (workspace_id, recipient_ref),
    ADD KEY links_workspace_code (workspace_id, code);

-- A key acts in one workspace; an `operator` key manages workspaces and acts in none (NULL).
-- Per-key rate limits: NULL for the installation's default.
ALTER TABLE api_keys
    ADD COLUMN workspace_id BIGINT NULL,
    ADD COLUMN rate_per_second BIGINT NULL CHECK (rate_per_second >= 0),
    ADD COLUMN rate_burst BIGINT NULL CHECK (rate_burst >= 1),
    ADD CONSTRAINT api_keys_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    ADD KEY api_keys_workspace_id (workspace_id, id);
UPDATE api_keys SET workspace_id = 1;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_role;
ALTER TABLE api_keys
    ADD CONSTRAINT api_keys_role CHECK (role IN ('admin', 'issuer', 'viewer', 'resolve', 'operator')),
    ADD CONSTRAINT api_keys_operator_has_no_workspace
        CHECK ((role = 'operator') = (workspace_id IS NULL));

ALTER TABLE webhook_subscriptions
    ADD COLUMN workspace_id BIGINT NOT NULL DEFAULT 1,
    ADD CONSTRAINT webhook_subscriptions_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    ADD KEY webhook_subscriptions_workspace_id (workspace_id, id);
