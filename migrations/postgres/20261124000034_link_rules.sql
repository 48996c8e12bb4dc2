-- A link's lifecycle and click-time rules (issue 34). All NULL for a plain link, which keeps
-- writing a version 1 record. `rules` is the API's JSON form, normalised, kept as text (the
-- sidecar turns it into the record's binary form and reads it back verbatim).
ALTER TABLE links
    ADD COLUMN valid_since TIMESTAMPTZ,
    ADD COLUMN not_yet_url TEXT,
    ADD COLUMN expired_url TEXT,
    ADD COLUMN rules TEXT;
-- The rule (and variant) that answered a visit, `<rule>` or `<rule>.<variant>`; NULL: the link's
-- own target (and every visit from before rules).
ALTER TABLE visits ADD COLUMN rule TEXT;
