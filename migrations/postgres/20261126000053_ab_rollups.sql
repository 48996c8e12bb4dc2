-- A/B results (issue 54) read these rollups, kept as visits and conversions are stored, never the
-- raw rows: a campaign's result at 10M visits and 1M conversions is a few rows per link
-- (docs/CONVERSIONS.md, "Results"). Keyed by link; `rule` is visits.rule with '' for the link's
-- own target; `name` is a conversion's name with '' for every name together. Rows stay when
-- retention deletes the raw visits or conversions they count (anonymous counts, as the other
-- rollups); an erase deletes the link's rows (docs/PRIVACY.md).

-- Human clicks per arm, and visitors: each of the link's human visitors counted once, in the arm
-- of their first human click on the link (the visitor set `link_visitors` says which is first).
CREATE TABLE ab_arms (
    code     TEXT COLLATE "C" NOT NULL,
    rule     TEXT COLLATE "C" NOT NULL,
    humans   BIGINT NOT NULL,
    visitors BIGINT NOT NULL,
    PRIMARY KEY (code, rule)
);

-- Conversions per arm and name, and distinct converting visitors (kept exact by ab_converters).
CREATE TABLE ab_conversions (
    code        TEXT COLLATE "C" NOT NULL,
    rule        TEXT COLLATE "C" NOT NULL,
    name        TEXT COLLATE "C" NOT NULL,
    conversions BIGINT NOT NULL,
    converting  BIGINT NOT NULL,
    PRIMARY KEY (code, rule, name)
);

-- Summed values in minor units, per arm, name and currency.
CREATE TABLE ab_values (
    code     TEXT COLLATE "C" NOT NULL,
    rule     TEXT COLLATE "C" NOT NULL,
    name     TEXT COLLATE "C" NOT NULL,
    currency TEXT COLLATE "C" NOT NULL,
    exponent BIGINT NOT NULL,
    total    BIGINT NOT NULL,
    PRIMARY KEY (code, rule, name, currency, exponent)
);

-- The visitors that converted, per arm and name: a conversion adds to `converting` only when its
-- visitor is new here.
CREATE TABLE ab_converters (
    code    TEXT COLLATE "C" NOT NULL,
    rule    TEXT COLLATE "C" NOT NULL,
    name    TEXT COLLATE "C" NOT NULL,
    visitor BYTEA NOT NULL,
    PRIMARY KEY (code, rule, name, visitor)
);

-- What is stored already.
INSERT INTO ab_arms (code, rule, humans, visitors)
SELECT code, rule, COUNT(*), SUM(first) FROM (
    SELECT code, COALESCE(rule, '') AS rule,
        CASE WHEN ROW_NUMBER() OVER (PARTITION BY code, visitor ORDER BY visited_at, event_id) = 1
            THEN 1 ELSE 0 END AS first
    FROM visits WHERE audience = 'human'
) AS v GROUP BY code, rule;

INSERT INTO ab_converters (code, rule, name, visitor)
SELECT DISTINCT code, COALESCE(rule, ''), name, visitor FROM conversions
UNION SELECT DISTINCT code, COALESCE(rule, ''), '', visitor FROM conversions;

INSERT INTO ab_conversions (code, rule, name, conversions, converting)
SELECT c.code, c.rule, c.name, c.n,
    (SELECT COUNT(*) FROM ab_converters a WHERE a.code = c.code AND a.rule = c.rule AND a.name = c.name)
FROM (
    SELECT code, COALESCE(rule, '') AS rule, name, COUNT(*) AS n FROM conversions
    GROUP BY code, COALESCE(rule, ''), name
    UNION ALL
    SELECT code, COALESCE(rule, ''), '', COUNT(*) FROM conversions GROUP BY code, COALESCE(rule, '')
) AS c;

INSERT INTO ab_values (code, rule, name, currency, exponent, total)
SELECT code, COALESCE(rule, ''), name, currency, exponent, SUM(value_minor) FROM conversions
WHERE currency IS NOT NULL GROUP BY code, COALESCE(rule, ''), name, currency, exponent
UNION ALL
SELECT code, COALESCE(rule, ''), '', currency, exponent, SUM(value_minor) FROM conversions
WHERE currency IS NOT NULL GROUP BY code, COALESCE(rule, ''), currency, exponent;
