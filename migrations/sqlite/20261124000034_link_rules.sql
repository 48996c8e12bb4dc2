-- A link's lifecycle and click-time rules (issue 34). All NULL for a plain link, which keeps
-- writing a version 1 record. `rules` is the API's JSON form, normalised (the sidecar turns it
-- into the record's binary form); `valid_since` is whole seconds like expires_at.
ALTER TABLE links ADD COLUMN valid_since TEXT;
ALTER TABLE links ADD COLUMN not_yet_url TEXT;
ALTER TABLE links ADD COLUMN expired_url TEXT;
ALTER TABLE links ADD COLUMN rules TEXT;
-- The rule (and variant) that answered a visit, `<rule>` or `<rule>.<variant>`; NULL: the link's
-- own target (and every visit from before rules).
ALTER TABLE visits ADD COLUMN rule TEXT;
