-- An idempotent create matches a live link of the same URL *and the same recipient reference*.
--
-- A link with a `ref` is one recipient's: handing it to another caller would attribute their
-- clicks to that recipient. So the URL-prefix index no longer holds recipient links (their
-- lookup goes through links_recipient_ref), and a campaign's batch, where every link has a
-- `ref`, no longer pays a random-key insert into it for every link.
DROP INDEX links_url_hash_prefix;
CREATE INDEX links_url_hash_prefix ON links (left(url_hash, 16))
    WHERE revoked_at IS NULL AND recipient_ref IS NULL;
