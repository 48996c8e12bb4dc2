-- Two roles for people (issue 21): `issuer` creates, changes and revokes links and reads them and
-- their statistics; `viewer` only reads. Existing keys keep their role.
ALTER TABLE api_keys DROP CONSTRAINT api_keys_role;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_role
    CHECK (role IN ('admin', 'issuer', 'viewer', 'resolve'));
