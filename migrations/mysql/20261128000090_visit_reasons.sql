-- Why a visit got its verdict (issue 78): see the PostgreSQL migration of the same number.
ALTER TABLE visits ADD COLUMN reasons SMALLINT NOT NULL DEFAULT 0;
