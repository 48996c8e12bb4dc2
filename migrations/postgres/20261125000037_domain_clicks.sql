-- Visits per short domain and minute, added to as visits are stored (issue 41): the domain health
-- check reads a few rows per domain instead of counting every visit of its window each minute.
-- `minute` is the minute's start in Unix seconds, like the other rollups' `day`.
CREATE TABLE domain_clicks (
    minute       BIGINT NOT NULL,
    short_domain TEXT NOT NULL,
    humans       BIGINT NOT NULL DEFAULT 0,
    bots         BIGINT NOT NULL DEFAULT 0,
    previews     BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, short_domain)
);

-- The last day's visits counted once, so the check sees the clicks of its window from the start.
INSERT INTO domain_clicks (minute, short_domain, humans, bots, previews)
SELECT (floor(extract(epoch FROM visited_at) / 60) * 60)::bigint, short_domain,
       COUNT(*) FILTER (WHERE audience = 'human'),
       COUNT(*) FILTER (WHERE audience = 'bot'),
       COUNT(*) FILTER (WHERE audience = 'preview')
FROM visits
WHERE short_domain IS NOT NULL AND visited_at >= now() - interval '1 day'
GROUP BY 1, 2;
