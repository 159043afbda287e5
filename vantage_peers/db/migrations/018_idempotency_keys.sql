-- Issue 21: idempotent retries. A create/send tool called with `idempotencyKey` stores the first
-- call's result here, in the same transaction as its writes, for 24 hours: a retry with the same key
-- (after a timeout, or a reply lost to a crash) gets that result and writes nothing twice.
CREATE TABLE idempotencyKeys (
    caller      TEXT NOT NULL,      -- who called (orchestrator, token profile, or 'local')
    key         TEXT NOT NULL,
    tool        TEXT NOT NULL,
    payloadHash TEXT NOT NULL,      -- sha256 of the tool name and its resolved arguments
    result      TEXT NOT NULL,      -- the first call's result, JSON
    createdAt   INTEGER NOT NULL,
    PRIMARY KEY (caller, key)
) WITHOUT ROWID;
CREATE INDEX idempotencyKeys_by_time ON idempotencyKeys (createdAt);
