-- User agents stored once (issue 38): the agent string was half of each raw visit's bytes, and a
-- campaign's clicks repeat a few hundred agents. A raw visit now holds the agent's id; the string
-- is here once, under the id every consumer computes from it alone (the first 8 bytes of its
-- SHA-256, shortlink_visit_enrich::agent::user_agent_id). Visits stored before keep their
-- `user_agent` text and have no id; visits from now on have the id and no text. A visit's agent:
--   SELECT COALESCE(v.user_agent, a.agent) FROM visits v LEFT JOIN user_agents a ON a.id = v.agent_id
-- Nothing counted reads it: the parse (browser, os, device, audience, agent) stays on the visit.
CREATE TABLE user_agents (
    id    BIGINT PRIMARY KEY,
    agent TEXT NOT NULL
);
ALTER TABLE visits ADD COLUMN agent_id BIGINT;
