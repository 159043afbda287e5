-- Version 2: memories (episodes are memories of type 'episode').
CREATE TABLE memories (
    seq        INTEGER PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    namespace  TEXT NOT NULL,
    type       TEXT NOT NULL,
    content    TEXT NOT NULL,
    createdBy  TEXT NOT NULL,
    relations  TEXT,                 -- JSON [{targetId, type}]
    isLatest   INTEGER NOT NULL DEFAULT 1,
    ttl        TEXT,                 -- ISO 8601 as given
    expiresAt  INTEGER,              -- ttl in ms, for filtering
    episode    TEXT,                 -- JSON {context, goal, action, outcome, insight, severity}
    createdAt  INTEGER NOT NULL,
    updatedAt  INTEGER NOT NULL
);
CREATE INDEX memories_by_namespace ON memories (namespace, createdAt DESC, id DESC);
CREATE INDEX memories_by_type ON memories (type, createdAt DESC, id DESC);
