-- Version 20 (issue #30): liveness of server processes, and which process holds each lease.
--
-- Every server process has a session id (random at start) and a row here, refreshed by its heartbeat
-- thread every VP_HEARTBEAT_SECONDS (default VP_TICK_SECONDS). It is live while `stoppedAt` is unset
-- and `liveUntil` (its last heartbeat + 2 beats + 5 s) is ahead; a clean shutdown sets `stoppedAt`.
-- Rows of processes gone for a day are pruned.
CREATE TABLE processes (
    session      TEXT PRIMARY KEY,
    orchestrator TEXT,                 -- VP_ORCHESTRATOR of the process (NULL: none)
    instance     TEXT NOT NULL DEFAULT '',
    pid          INTEGER NOT NULL,
    host         TEXT NOT NULL,        -- host name
    pidSpace     TEXT,                 -- boot and PID namespace: where `pid` means this process
    transport    TEXT NOT NULL,        -- stdio, http
    beatMs       INTEGER NOT NULL,     -- its heartbeat interval
    startedAt    INTEGER NOT NULL,
    heartbeatAt  INTEGER NOT NULL,
    liveUntil    INTEGER NOT NULL,
    stoppedAt    INTEGER
) WITHOUT ROWID;
CREATE INDEX processes_by_identity ON processes (orchestrator, instance, liveUntil);
CREATE INDEX processes_by_heartbeat ON processes (heartbeatAt);

-- The session of the process that was granted (or last renewed by hand) a lease; NULL when the grant
-- did not come from a server process's own identity (over HTTP, a scheduler job, an older version).
ALTER TABLE agentLeases ADD COLUMN holderSession TEXT;
-- The session told that this lease came from a gone process (so a lapse is reported once).
ALTER TABLE agentLeases ADD COLUMN noticedBy TEXT;
CREATE INDEX agentLeases_holder_history ON agentLeases (holder, holderInstance, releasedAt);
