-- Conversions (issue 54): see the PostgreSQL migration of the same number. Times are Unix ms.
CREATE TABLE conversions (
    id           TEXT PRIMARY KEY NOT NULL,
    workspace_id INTEGER NOT NULL REFERENCES workspaces (id),
    event_id     TEXT NOT NULL,
    visit_id     TEXT NOT NULL,
    code         TEXT NOT NULL,
    campaign     TEXT,
    recipient_ref TEXT,
    rule         TEXT,
    short_domain TEXT,
    device       TEXT,
    country      TEXT,
    visitor      BLOB NOT NULL,
    clicked_ms   INTEGER NOT NULL,
    name         TEXT NOT NULL,
    value_minor  INTEGER,
    currency     TEXT,
    exponent     INTEGER,
    converted_ms INTEGER NOT NULL,
    received_ms  INTEGER NOT NULL,
    CHECK ((value_minor IS NULL) = (currency IS NULL))
);
CREATE UNIQUE INDEX conversions_event ON conversions (workspace_id, event_id);
CREATE INDEX conversions_code ON conversions (workspace_id, code, rule);
CREATE INDEX conversions_campaign ON conversions (workspace_id, campaign, rule)
    WHERE campaign IS NOT NULL;

CREATE INDEX visits_code_time ON visits (code, visited_at);
