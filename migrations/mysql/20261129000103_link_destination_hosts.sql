-- The hosts a link can send to besides its target's (issue 79): see the PostgreSQL migration of
-- the same number. ascii_bin: host keys are punycode, and the range compares bytes.
CREATE TABLE link_destination_hosts (
    host_key    VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    code        VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (host_key, code),
    KEY link_destination_hosts_code (code)
) ENGINE = InnoDB;
