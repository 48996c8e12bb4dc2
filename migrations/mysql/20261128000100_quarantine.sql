-- Quarantine after the fact (issue 79): see the PostgreSQL migration of the same number.
-- ascii_bin: hosts are punycode, and the range compares bytes.
ALTER TABLE links
    ADD COLUMN target_host VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NULL,
    ADD COLUMN quarantined_at DATETIME(6) NULL,
    ADD KEY links_target_host (target_host, code);

CREATE TABLE link_quarantines (
    code            VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    workspace_id    BIGINT NOT NULL,
    feed            VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    entry           MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    quarantined_at  DATETIME(6) NOT NULL,
    released_at     DATETIME(6) NULL,
    released_by     VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    KEY link_quarantines_feed (feed),
    KEY link_quarantines_workspace (workspace_id, quarantined_at DESC)
) ENGINE = InnoDB;
