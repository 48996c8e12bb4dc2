-- Abuse reports (issue 79): see the PostgreSQL migration of the same number.
CREATE TABLE abuse_reports (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    code            TEXT NOT NULL,
    host            TEXT NOT NULL,
    reported_at     TEXT NOT NULL
);
CREATE INDEX abuse_reports_reported_at ON abuse_reports (reported_at DESC);
