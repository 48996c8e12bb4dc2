-- A link's preview card (issue 35): the API's JSON form, normalised (title, description, image,
-- site_name), NULL for none. Redis keeps the encoded card beside the record (`sl:p:<code>`).
ALTER TABLE links ADD COLUMN preview TEXT;
