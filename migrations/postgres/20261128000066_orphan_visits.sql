-- Orphan visits (issue 70): requests on a pool host that no link answered (the module's `o`
-- events: base_url, invalid_short_url, regular_404, recovered) and taps on a known link that is
-- gone (410). Stored by host: a host's workspace is the issuing list's grouping when read. Raw
-- rows follow the raw visits' retention; `orphan_counts` keeps each host's totals per kind.
CREATE TABLE orphan_visits (
    id VARCHAR(64) PRIMARY KEY,
    kind VARCHAR(32) NOT NULL,
    domain VARCHAR(255) NOT NULL,
    path VARCHAR(2048) NOT NULL,
    at_ms BIGINT NOT NULL,
    status BIGINT,
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
