-- Settings the stored data depends on, recorded on first start and checked on every start
-- (e.g. `code_scheme`: the fingerprint of the code secret, length and check character that
-- every generated code was issued under; never the secret itself).
CREATE TABLE settings (
    name       TEXT PRIMARY KEY NOT NULL,
    value      TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
