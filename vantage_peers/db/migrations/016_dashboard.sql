-- Version 16: the web dashboard's audit of human actions (who stepped in, on what, how).
-- One row per action a person took from the dashboard (a message sent as human:<name>, a task
-- reassigned / unblocked / cancelled / released, a recurring task paused). The change itself is
-- made by the domain store, in the same transaction as this row.

CREATE TABLE humanActions (
    seq        INTEGER PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    actor      TEXT NOT NULL,        -- human:<name>
    via        TEXT,                 -- how they signed in: loopback, master, or the OAuth client id
    action     TEXT NOT NULL,        -- send_message, reassign_task, unblock_task, cancel_task, release_claim, pause_recurring
    targetKind TEXT NOT NULL,        -- message, task, recurring
    targetId   TEXT NOT NULL,
    detail     TEXT,                 -- JSON: the arguments of the action
    createdAt  INTEGER NOT NULL
);
CREATE INDEX humanActions_by_time ON humanActions (createdAt DESC, id DESC);
CREATE INDEX humanActions_by_target ON humanActions (targetId, createdAt);

-- The Tasks board filters by priority inside one status column.
CREATE INDEX tasks_by_status_priority ON tasks (status, priority, updatedAt DESC, id DESC);
