-- Orphan visits (issue 70): see the PostgreSQL migration of the same number.
CREATE TABLE orphan_visits (
    id VARCHAR(64) PRIMARY KEY,
    kind VARCHAR(32) NOT NULL,
    domain VARCHAR(255) NOT NULL,
    path VARCHAR(2048) NOT NULL,
    at_ms BIGINT NOT NULL,
    status INTEGER,
    device VARCHAR(16) NOT NULL,
    audience VARCHAR(16) NOT NULL,
    country VARCHAR(8),
    referrer_host VARCHAR(255),
    language VARCHAR(64)
);
CREATE INDEX orphan_visits_domain_time ON orphan_visits (domain, at_ms);
CREATE INDEX orphan_visits_time ON orphan_visits (at_ms);
CREATE TABLE orphan_counts (
    domain VARCHAR(255) NOT NULL,
    kind VARCHAR(32) NOT NULL,
    visits BIGINT NOT NULL,
    PRIMARY KEY (domain, kind)
);
