-- Version 20 (see db/migrations/020_processes.sql): liveness of server processes, lease sessions.
CREATE TABLE processes (
    session      TEXT PRIMARY KEY,
    orchestrator TEXT,
    instance     TEXT NOT NULL DEFAULT '',
    pid          BIGINT NOT NULL,
    host         TEXT NOT NULL,
    pidSpace     TEXT,
    transport    TEXT NOT NULL,
    beatMs       BIGINT NOT NULL,
    startedAt    BIGINT NOT NULL,
    heartbeatAt  BIGINT NOT NULL,
    liveUntil    BIGINT NOT NULL,
    stoppedAt    BIGINT
);

CREATE INDEX processes_by_identity ON processes (orchestrator, instance, liveUntil);

CREATE INDEX processes_by_heartbeat ON processes (heartbeatAt);

ALTER TABLE agentLeases ADD COLUMN holderSession TEXT;

ALTER TABLE agentLeases ADD COLUMN noticedBy TEXT;

CREATE INDEX agentLeases_holder_history ON agentLeases (holder, holderInstance, releasedAt);
