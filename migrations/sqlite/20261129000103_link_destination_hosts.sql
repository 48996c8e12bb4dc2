-- The hosts a link can send to besides its target's (issue 79): see the PostgreSQL migration of
-- the same number.
CREATE TABLE link_destination_hosts (
    host_key    TEXT NOT NULL,
    code        TEXT NOT NULL,
    PRIMARY KEY (host_key, code)
) WITHOUT ROWID;
CREATE INDEX link_destination_hosts_code ON link_destination_hosts (code);
