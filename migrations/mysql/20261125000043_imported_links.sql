-- Links imported from another shortener (issue 40): see the SQLite migration of the same number.
-- Binary collation as for links.code: imported codes keep their case (Bitly's `AbC` and `abc`
-- are two links).
CREATE TABLE imported_links (
    code            VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    source          VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    domain          VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    source_target   MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    title           TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    source_visits   BIGINT NOT NULL DEFAULT 0,
    imported_at_ms  BIGINT NOT NULL,
    PRIMARY KEY (code),
    KEY imported_links_source (source, code)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
