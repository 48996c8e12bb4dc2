-- Visits per short domain and minute, added to as visits are stored (issue 41): the domain health
-- check reads a few rows per domain instead of counting every visit of its window each minute.
-- `minute` is the minute's start in Unix seconds, like the other rollups' `day`.
CREATE TABLE domain_clicks (
    minute       BIGINT NOT NULL,
    short_domain VARCHAR(253) NOT NULL,
    humans       BIGINT NOT NULL DEFAULT 0,
    bots         BIGINT NOT NULL DEFAULT 0,
    previews     BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, short_domain)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The last day's visits counted once, so the check sees the clicks of its window from the start.
-- Visit times are stored in UTC: the difference from the epoch does not depend on the session's
-- time zone, as UNIX_TIMESTAMP would.
INSERT INTO domain_clicks (minute, short_domain, humans, bots, previews)
SELECT FLOOR(TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00', visited_at) / 60) * 60 AS minute,
       short_domain,
       SUM(audience = 'human'), SUM(audience = 'bot'), SUM(audience = 'preview')
FROM visits
WHERE short_domain IS NOT NULL AND visited_at >= UTC_TIMESTAMP(6) - INTERVAL 1 DAY
GROUP BY minute, short_domain;
