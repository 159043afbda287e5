-- Version 8: recurring task templates (fired by the scheduler by compare-and-set on nextRunAt),
-- the link from a created task back to its template, and the scheduler's per-job run state.
CREATE TABLE recurringTasks (
    seq            INTEGER PRIMARY KEY,
    id             TEXT NOT NULL UNIQUE,
    title          TEXT NOT NULL,
    description    TEXT,
    assignedTo     TEXT NOT NULL,
    priority       TEXT NOT NULL,
    project        TEXT,
    cronExpression TEXT NOT NULL,      -- standard 5-field cron, validated by croniter
    timezone       TEXT NOT NULL DEFAULT 'UTC', -- IANA zone the cron is read in
    paused         INTEGER NOT NULL DEFAULT 0,
    nextRunAt      INTEGER,            -- ms; NULL while paused
    lastTriggered  INTEGER,            -- ms of the last firing
    lastTaskId     TEXT,
    runCount       INTEGER NOT NULL DEFAULT 0,
    pausedAt       INTEGER,
    createdBy      TEXT,               -- NULL = created without an identity (no owner to check)
    createdAt      INTEGER NOT NULL,
    updatedAt      INTEGER NOT NULL
);
CREATE INDEX recurring_due ON recurringTasks (nextRunAt, id) WHERE paused = 0;
CREATE INDEX recurring_by_created ON recurringTasks (createdAt DESC, id DESC);
CREATE INDEX recurring_by_assignee ON recurringTasks (assignedTo, createdAt DESC, id DESC);
CREATE INDEX recurring_by_project ON recurringTasks (project, createdAt DESC, id DESC);

-- One row per fired occurrence: the primary key makes "one task per occurrence, ever" a constraint.
CREATE TABLE recurringRuns (
    recurringTaskId TEXT NOT NULL REFERENCES recurringTasks (id) ON DELETE CASCADE,
    scheduledAt     INTEGER NOT NULL,  -- the nextRunAt value that was due
    taskId          TEXT NOT NULL,
    firedAt         INTEGER NOT NULL,
    PRIMARY KEY (recurringTaskId, scheduledAt)
) WITHOUT ROWID;

-- Tasks created by a template keep its id (the template may be deleted later; the task stays).
ALTER TABLE tasks ADD COLUMN recurringTaskId TEXT;
CREATE INDEX tasks_by_recurring ON tasks (recurringTaskId, createdAt) WHERE recurringTaskId IS NOT NULL;

-- Scheduler jobs: cadence and last-run state shared by every process on the file.
CREATE TABLE schedulerJobs (
    name           TEXT PRIMARY KEY,
    schedule       TEXT NOT NULL,      -- 'every tick', 'every 3600s' or 'cron 0 6 * * *'
    nextRunAt      INTEGER NOT NULL DEFAULT 0,
    lastStartedAt  INTEGER,
    lastFinishedAt INTEGER,
    lastStatus     TEXT,               -- 'ok' or 'error'
    lastError      TEXT,
    lastDurationMs INTEGER,
    lastOwner      TEXT,
    runCount       INTEGER NOT NULL DEFAULT 0,
    failCount      INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
