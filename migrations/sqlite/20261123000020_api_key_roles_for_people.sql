-- Two roles for people (issue 21): `issuer` creates, changes and revokes links and reads them and
-- their statistics; `viewer` only reads. Existing keys keep their role. SQLite cannot widen a
-- CHECK in place: a new table with the wider one takes the rows (ids kept) and the name; nothing
-- references api_keys.
CREATE TABLE api_keys_roles (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT NOT NULL,
    -- SHA-256 (hex) of the key; the key itself is never stored.
    key_hash   TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    revoked_at TEXT,
    role       TEXT NOT NULL DEFAULT 'admin'
        CHECK (role IN ('admin', 'issuer', 'viewer', 'resolve'))
);
INSERT INTO api_keys_roles (id, name, key_hash, created_at, revoked_at, role)
    SELECT id, name, key_hash, created_at, revoked_at, role FROM api_keys;
DROP TABLE api_keys;
ALTER TABLE api_keys_roles RENAME TO api_keys;
