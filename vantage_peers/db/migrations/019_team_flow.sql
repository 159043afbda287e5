-- Version 19 (issue #30, the team flow): pools, task files, lapsed claims, message data.
-- A task with assignedTo = '' has no assignee: it is open to its `pool` (NULL: the whole team).
-- `lapsedAt`: when its last claim lapsed or was force-released; while the task is todo, every worker
-- eligible for its pool may take it over (the former holder's name never locks it). Cleared by checkout.
ALTER TABLE tasks ADD COLUMN pool TEXT;
ALTER TABLE tasks ADD COLUMN files TEXT;        -- JSON string[]: paths/globs the task will touch
ALTER TABLE tasks ADD COLUMN lapsedAt INTEGER;
-- "What may I claim now": todo, not paused tasks, by pool.
CREATE INDEX tasks_claimable ON tasks (pool, updatedAt DESC, id DESC) WHERE status = 'todo' AND paused = 0;

-- A bounded JSON object an agent sends along with the text (returned as-is).
ALTER TABLE messages ADD COLUMN data TEXT;

-- A path reservation taken with a task claim (checkout_task reserveFiles): released with the claim.
ALTER TABLE agentLeases ADD COLUMN claimOf TEXT;
CREATE INDEX agentLeases_by_claim ON agentLeases (claimOf) WHERE claimOf IS NOT NULL AND releasedAt IS NULL;
