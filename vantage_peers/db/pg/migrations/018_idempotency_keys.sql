-- Version 18 (see db/migrations/018_idempotency_keys.sql): results kept for idempotent retries.
CREATE TABLE idempotencyKeys (
    caller      TEXT NOT NULL,      -- who called (orchestrator, token profile, or 'local')
    key         TEXT NOT NULL,
    tool        TEXT NOT NULL,
    payloadHash TEXT NOT NULL,      -- sha256 of the tool name and its resolved arguments
    result      TEXT NOT NULL,      -- the first call's result, JSON
    createdAt   BIGINT NOT NULL,
    PRIMARY KEY (caller, key)
);

CREATE INDEX idempotencyKeys_by_time ON idempotencyKeys (createdAt);
