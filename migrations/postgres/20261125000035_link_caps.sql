-- A link's visit cap and password (issue 34's last part). NULL for none. `password_digest` is
-- the salted SHA-256 of the password as hex (salt then digest, `wire::record::password`): the
-- password itself is never stored.
ALTER TABLE links
    ADD COLUMN max_visits BIGINT CHECK (max_visits >= 1),
    ADD COLUMN password_digest TEXT;
