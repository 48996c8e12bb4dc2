-- A link's click id parameter (issue 54): the query parameter the nginx module appends the
-- click's id in (`[A-Za-z0-9_.-]{1,32}`, checked by the API). NULL: no id is sent.
ALTER TABLE links ADD COLUMN click_id_param VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL;
