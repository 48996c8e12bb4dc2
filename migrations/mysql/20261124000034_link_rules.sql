-- A link's lifecycle and click-time rules (issue 34). All NULL for a plain link, which keeps
-- writing a version 1 record. `rules` is the API's JSON form, normalised, kept as text (the
-- sidecar turns it into the record's binary form and reads it back verbatim); the API keeps a
-- link's record under 16 KiB, so MEDIUMTEXT is ample.
ALTER TABLE links
    ADD COLUMN valid_since DATETIME(6) NULL,
    ADD COLUMN not_yet_url MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    ADD COLUMN expired_url MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    ADD COLUMN rules MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;
-- The rule (and variant) that answered a visit, `<rule>` or `<rule>.<variant>`; NULL: the link's
-- own target (and every visit from before rules).
ALTER TABLE visits ADD COLUMN rule VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NULL;
