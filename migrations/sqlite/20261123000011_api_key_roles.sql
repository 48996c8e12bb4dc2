-- API keys carry a role (issue 26): `admin` may use every route, `resolve` only
-- GET /api/v1/resolve/{code} (nginx's fallback). Existing keys keep full rights, except the key
-- scripts/run created for nginx's fallback (`nginx-resolve`), which is narrowed at once: nginx keeps
-- sending it, and resolving is all it ever did. A new role widens the CHECK (on SQLite: a new
-- api_keys table, copied, renamed; nothing references it).
ALTER TABLE api_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'admin'
    CHECK (role IN ('admin', 'resolve'));
UPDATE api_keys SET role = 'resolve' WHERE name = 'nginx-resolve';
