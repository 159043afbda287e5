-- Version 22 (see db/migrations/022_http_limits.sql): shared OAuth rate limits and back-off.
CREATE TABLE httpLimits (
    key         TEXT PRIMARY KEY,
    tokens      DOUBLE PRECISION NOT NULL DEFAULT 0,
    failures    BIGINT NOT NULL DEFAULT 0,
    lockedUntil BIGINT NOT NULL DEFAULT 0,
    updatedAt   BIGINT NOT NULL
);

CREATE INDEX httpLimits_by_update ON httpLimits (updatedAt);
