-- Version 22 (issue #31): the OAuth endpoints' rate limits and failed-login back-off, shared by every
-- `serve` worker and replica on the database (they lived in each process's memory: N processes
-- allowed N times the rate). One row per (limit, client address): a token bucket (`tokens`, refilled
-- from `updatedAt`) or a back-off (`failures`, `lockedUntil`). Decided in one write transaction per
-- request (http/shared_limits.py); rows untouched for an hour are pruned.
CREATE TABLE httpLimits (
    key         TEXT PRIMARY KEY,      -- '<limit>|<address>', e.g. 'token|203.0.113.9', 'register|*'
    tokens      REAL NOT NULL DEFAULT 0,
    failures    INTEGER NOT NULL DEFAULT 0,
    lockedUntil INTEGER NOT NULL DEFAULT 0,   -- Unix ms
    updatedAt   INTEGER NOT NULL              -- Unix ms
) WITHOUT ROWID;
CREATE INDEX httpLimits_by_update ON httpLimits (updatedAt);
