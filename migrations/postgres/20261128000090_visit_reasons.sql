-- Why a visit got its verdict (issue 78): `audience` is the verdict (human, preview, scanner, bot)
-- and `reasons` its reasons, a bit set named in shortlink_wire::verdict::Reasons (1 the agent
-- table, 2 no agent, 4 the method, 8 a browser's agent without its headers, 16 a hosting
-- network, 32 soon after delivery, 64 a sweep, 128 confirmed by a person; docs/BOTS.md).
-- Visits stored before it have none recorded (0), as a person's.
ALTER TABLE visits ADD COLUMN reasons SMALLINT NOT NULL DEFAULT 0;
