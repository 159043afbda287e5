-- Version 3: missions, tasks (with work segments and full-text search) and mission templates.

CREATE TABLE missions (
    seq          INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    name         TEXT NOT NULL,
    description  TEXT,
    project      TEXT NOT NULL,
    status       TEXT NOT NULL,      -- brainstorm, plan, execute, validate, complete, cancelled
    priority     TEXT NOT NULL,      -- urgent, high, medium, low
    pilot        TEXT NOT NULL,
    agents       TEXT NOT NULL,      -- JSON string[]
    brief        TEXT,
    startDate    INTEGER,
    targetDate   INTEGER,
    progress     REAL,
    templateId   TEXT,               -- template name recorded at creation (lineage only)
    cancelReason TEXT,
    createdBy    TEXT NOT NULL,
    createdAt    INTEGER NOT NULL,
    updatedAt    INTEGER NOT NULL
);
CREATE INDEX missions_by_updated ON missions (updatedAt DESC, id DESC);
CREATE INDEX missions_by_project ON missions (project, updatedAt DESC, id DESC);
CREATE INDEX missions_by_pilot ON missions (pilot, updatedAt DESC, id DESC);
CREATE INDEX missions_by_status ON missions (status, updatedAt DESC, id DESC);

CREATE TABLE tasks (
    seq                INTEGER PRIMARY KEY,
    id                 TEXT NOT NULL UNIQUE,
    title              TEXT NOT NULL,
    description        TEXT,
    project            TEXT,
    tags               TEXT,          -- JSON string[]
    assignedTo         TEXT NOT NULL,
    assignedToInstance TEXT,
    priority           TEXT NOT NULL,
    status             TEXT NOT NULL, -- todo, in_progress, review, blocked, done, cancelled
    dependsOn          TEXT,          -- JSON task id[]
    missionId          TEXT REFERENCES missions (id),
    estimatedMinutes   REAL,
    actualMinutes      REAL,
    durationSource     TEXT,          -- 'measured' (sum of segments) or 'inferred' (start -> end)
    startedAt          INTEGER,
    completedAt        INTEGER,
    dueDate            INTEGER,
    completionNote     TEXT,
    blockedBy          TEXT,
    cancelReason       TEXT,
    paused             INTEGER NOT NULL DEFAULT 0, -- a paused task is `todo` reserved to its assignee
    pausedAt           INTEGER,
    createdBy          TEXT NOT NULL,
    createdAt          INTEGER NOT NULL,
    updatedAt          INTEGER NOT NULL
);
-- list_tasks is newest-updated first; one index per filter.
CREATE INDEX tasks_by_updated ON tasks (updatedAt DESC, id DESC);
CREATE INDEX tasks_by_assignee ON tasks (assignedTo, updatedAt DESC, id DESC);
CREATE INDEX tasks_by_status ON tasks (status, updatedAt DESC, id DESC);
CREATE INDEX tasks_by_mission ON tasks (missionId, updatedAt DESC, id DESC);
CREATE INDEX tasks_by_project ON tasks (project, updatedAt DESC, id DESC);
CREATE INDEX tasks_by_creator ON tasks (createdBy, updatedAt DESC, id DESC);
CREATE INDEX tasks_by_instance ON tasks (assignedToInstance, updatedAt DESC, id DESC);
-- The hot query "my open tasks" (assignedTo + status=open) walks this in order and stops at limit+1.
CREATE INDEX tasks_open_by_assignee ON tasks (assignedTo, updatedAt DESC, id DESC)
    WHERE status IN ('todo', 'in_progress', 'review', 'blocked');
CREATE INDEX tasks_by_due ON tasks (dueDate, id) WHERE dueDate IS NOT NULL;

-- Work segments: one row per stretch of actual work. At most one open segment per task.
CREATE TABLE taskSegments (
    seq          INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    taskId       TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    orchestrator TEXT,
    startedAt    INTEGER NOT NULL,
    endedAt      INTEGER,
    createdAt    INTEGER NOT NULL
);
CREATE UNIQUE INDEX segments_one_open ON taskSegments (taskId) WHERE endedAt IS NULL;
CREATE INDEX segments_by_task ON taskSegments (taskId, startedAt);

CREATE VIRTUAL TABLE tasks_fts USING fts5 (
    title, description, content = 'tasks', content_rowid = 'seq', tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER tasks_fts_insert AFTER INSERT ON tasks BEGIN
    INSERT INTO tasks_fts (rowid, title, description) VALUES (new.seq, new.title, new.description);
END;
CREATE TRIGGER tasks_fts_delete AFTER DELETE ON tasks BEGIN
    INSERT INTO tasks_fts (tasks_fts, rowid, title, description) VALUES ('delete', old.seq, old.title, old.description);
END;
CREATE TRIGGER tasks_fts_update AFTER UPDATE OF title, description ON tasks BEGIN
    INSERT INTO tasks_fts (tasks_fts, rowid, title, description) VALUES ('delete', old.seq, old.title, old.description);
    INSERT INTO tasks_fts (rowid, title, description) VALUES (new.seq, new.title, new.description);
END;

CREATE TABLE missionTemplates (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL UNIQUE,
    description TEXT,
    steps       TEXT NOT NULL,       -- JSON [{title, description, assignedTo?, dependsOn?, tags?}]
    isDefault   INTEGER NOT NULL DEFAULT 0,
    createdBy   TEXT NOT NULL,
    createdAt   INTEGER NOT NULL,
    updatedAt   INTEGER NOT NULL
);
