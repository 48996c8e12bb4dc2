-- Conversions (issue 54): a sender's lead, sign-up or purchase attached to the click (visit) that
-- led to it. The visit's attributes are copied in at insert (link, campaign, ref, rule and
-- variant, short domain, device, country, visitor, click time) so that results read this table
-- only, never a join over the raw visits. Times are Unix milliseconds on every backend.
-- A value is exact: minor units (cents) of its ISO 4217 currency, with the currency's exponent
-- kept beside it (docs/CONVERSIONS.md).
CREATE TABLE conversions (
    id           TEXT COLLATE "C" PRIMARY KEY,
    workspace_id BIGINT NOT NULL CONSTRAINT conversions_workspace REFERENCES workspaces (id),
    -- The sender's idempotency key: a repeat answers the first conversion (unique below).
    event_id     TEXT COLLATE "C" NOT NULL,
    -- The click: visits.event_id.
    visit_id     TEXT COLLATE "C" NOT NULL,
    code         TEXT COLLATE "C" NOT NULL,
    campaign     TEXT,
    recipient_ref TEXT,
    -- `<rule>` or `<rule>.<variant>`, NULL for the link's own target (as visits.rule).
    rule         TEXT COLLATE "C",
    short_domain TEXT,
    device       TEXT,
    country      TEXT,
    visitor      BYTEA NOT NULL,
    clicked_ms   BIGINT NOT NULL,
    name         TEXT NOT NULL,
    value_minor  BIGINT,
    currency     TEXT,
    exponent     BIGINT,
    converted_ms BIGINT NOT NULL,
    received_ms  BIGINT NOT NULL,
    CONSTRAINT conversions_value CHECK ((value_minor IS NULL) = (currency IS NULL))
);
CREATE UNIQUE INDEX conversions_event ON conversions (workspace_id, event_id);
CREATE INDEX conversions_code ON conversions (workspace_id, code, rule);
CREATE INDEX conversions_campaign ON conversions (workspace_id, campaign, rule)
    WHERE campaign IS NOT NULL;

-- A conversion names its click by id or by the link's latest human visit (`code` + `ref`), and
-- the A/B results count a link's clicks per variant: both read a link's visits, which until now
-- only a scan of every visit found.
CREATE INDEX visits_code_time ON visits (code, visited_at);
