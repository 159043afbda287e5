-- Version 13: one lease primitive for task claims, path reservations and named slots (docs/leases.md).
-- (The `leases` table of version 1 stays: it is the scheduler's job lease between processes.)

-- A lease: `kind` task|path|slot, `key` (task id, path glob, slot name) within `scope` (the repo of
-- a path, '' otherwise), held by an orchestrator instance until `expiresAt`. A row stays after its
-- release (`releasedAt`, `releaseReason`) so that a former holder can be told LEASE_LOST.
CREATE TABLE agentLeases (
    seq            INTEGER PRIMARY KEY,
    id             TEXT NOT NULL UNIQUE,
    kind           TEXT NOT NULL,
    scope          TEXT NOT NULL DEFAULT '',
    key            TEXT NOT NULL,
    holder         TEXT NOT NULL,
    holderInstance TEXT NOT NULL DEFAULT '',
    exclusive      INTEGER NOT NULL DEFAULT 1,
    capacity       INTEGER NOT NULL DEFAULT 1,
    ttlMs          INTEGER NOT NULL,
    fencingToken   INTEGER NOT NULL,
    reason         TEXT,
    grantedAt      INTEGER NOT NULL,
    renewedAt      INTEGER NOT NULL,
    expiresAt      INTEGER NOT NULL,
    releasedAt     INTEGER,
    releaseReason  TEXT,          -- released, completed, expired, forced, superseded
    releasedBy     TEXT
);
CREATE INDEX agentLeases_active ON agentLeases (kind, scope, key) WHERE releasedAt IS NULL;
CREATE INDEX agentLeases_by_holder ON agentLeases (holder, holderInstance) WHERE releasedAt IS NULL;
CREATE INDEX agentLeases_by_expiry ON agentLeases (expiresAt) WHERE releasedAt IS NULL;
CREATE INDEX agentLeases_history ON agentLeases (kind, scope, key, fencingToken);

-- The fencing counter of each key: +1 on every grant, in the granting transaction.
CREATE TABLE leaseFences (
    kind  TEXT NOT NULL,
    scope TEXT NOT NULL,
    key   TEXT NOT NULL,
    token INTEGER NOT NULL,
    PRIMARY KEY (kind, scope, key)
) WITHOUT ROWID;

-- Notes on a task written by the system (e.g. "[auto] claim of bob/b1 lapsed …"), newest last.
CREATE TABLE taskNotes (
    seq       INTEGER PRIMARY KEY,
    id        TEXT NOT NULL UNIQUE,
    taskId    TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    author    TEXT NOT NULL,
    content   TEXT NOT NULL,
    createdAt INTEGER NOT NULL
);
CREATE INDEX taskNotes_by_task ON taskNotes (taskId, seq);
