-- Version 19 (see db/migrations/019_team_flow.sql): pools, task files, lapsed claims, message data.
ALTER TABLE tasks ADD COLUMN pool TEXT;
ALTER TABLE tasks ADD COLUMN files TEXT;
ALTER TABLE tasks ADD COLUMN lapsedAt BIGINT;
CREATE INDEX tasks_claimable ON tasks (pool, updatedAt DESC, id DESC) WHERE status = 'todo' AND paused = 0;

ALTER TABLE messages ADD COLUMN data TEXT;

ALTER TABLE agentLeases ADD COLUMN claimOf TEXT;
CREATE INDEX agentLeases_by_claim ON agentLeases (claimOf) WHERE claimOf IS NOT NULL AND releasedAt IS NULL;
