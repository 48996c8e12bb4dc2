-- Abuse reports (issue 79): see the PostgreSQL migration of the same number.
CREATE TABLE abuse_reports (
    id              BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    code            VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    host            VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    reported_at     DATETIME(6) NOT NULL,
    KEY abuse_reports_reported_at (reported_at DESC)
) ENGINE = InnoDB;
