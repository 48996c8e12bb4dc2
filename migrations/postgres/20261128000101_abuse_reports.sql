-- Abuse reports (issue 79): a visitor's report of a short link, from the warning page or a
-- domain's home page, for the operator's queue (`shortlink-sidecar abuse-reports`). The code as
-- the visitor's request named it and the host it came to; never a target, never the visitor's
-- address.
CREATE TABLE abuse_reports (
    id              BIGSERIAL PRIMARY KEY,
    code            TEXT COLLATE "C" NOT NULL,
    host            TEXT COLLATE "C" NOT NULL,
    reported_at     TIMESTAMPTZ NOT NULL
);
CREATE INDEX abuse_reports_reported_at ON abuse_reports (reported_at DESC);
