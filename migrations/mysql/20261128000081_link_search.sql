-- The console's search (issue 80): a link's code, target, recipient reference, campaign and tags,
-- lowercased into one stored column under a FULLTEXT index (InnoDB indexes only stored columns,
-- and its search follows the column's collation: the fields' own are binary, case-sensitive).
-- MariaDB has no trigram index: the index finds words by their beginning (3 characters or more,
-- not InnoDB's stopwords), and `LIKE` on the few rows found keeps the exact substring; a part
-- of a word in its middle is found only by that `LIKE` alone, reading the workspace's links.
ALTER TABLE links
    ADD COLUMN search_text MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci
        AS (LOWER(CONCAT_WS(' ', code, target, recipient_ref, campaign, tags))) STORED,
    ADD FULLTEXT INDEX links_search (search_text);
