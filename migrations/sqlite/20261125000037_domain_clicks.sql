-- Visits per short domain and minute, added to as visits are stored (issue 41): the domain health
-- check reads a few rows per domain instead of counting every visit of its window each minute.
-- `minute` is the minute's start in Unix seconds, like the other rollups' `day`.
CREATE TABLE domain_clicks (
    minute       INTEGER NOT NULL,
    short_domain TEXT NOT NULL,
    humans       INTEGER NOT NULL DEFAULT 0,
    bots         INTEGER NOT NULL DEFAULT 0,
    previews     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, short_domain)
) WITHOUT ROWID;

-- The last day's visits counted once, so the check sees the clicks of its window from the start.
INSERT INTO domain_clicks (minute, short_domain, humans, bots, previews)
SELECT (visited_at / 60000) * 60, short_domain,
       SUM(audience = 'human'), SUM(audience = 'bot'), SUM(audience = 'preview')
FROM visits
WHERE short_domain IS NOT NULL AND visited_at >= (CAST(strftime('%s', 'now') AS INTEGER) - 86400) * 1000
GROUP BY 1, 2;
