-- Version 2: memories (episodes are memories of type 'episode'), their full-text index and the
-- embedding job queue. The vector table (sqlite-vec vec0) is created at run time by
-- vantage_peers/search/vectors.py, because its dimension is known only once the first embedding
-- comes back from the configured model.
CREATE TABLE memories (
    seq          INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    namespace    TEXT NOT NULL,          -- exact and case-sensitive
    type         TEXT NOT NULL,
    content      TEXT NOT NULL,
    createdBy    TEXT NOT NULL,
    relations    TEXT,                   -- JSON [{targetId, type}]
    isLatest     INTEGER NOT NULL DEFAULT 1,   -- 0 = superseded (`updates`) or soft-deleted
    supersededBy TEXT,                   -- id of the memory whose `updates` relation archived this one
    deletedAt    INTEGER,                -- set by soft_delete_memory
    ttl          TEXT,                   -- ISO 8601 as given
    expiresAt    INTEGER,                -- ttl in ms; expired rows are never returned
    episode      TEXT,                   -- JSON {context, goal, action, outcome, insight, severity}
    createdAt    INTEGER NOT NULL,
    updatedAt    INTEGER NOT NULL,
    -- One FTS token per namespace ('n' + hex of the UTF-8 bytes): a namespaced full-text query
    -- filters inside the FTS index (and a `prefix/*` query is a token prefix query), so BM25 is
    -- computed only for rows of that namespace.
    nsKey        TEXT GENERATED ALWAYS AS ('n' || hex(namespace)) VIRTUAL
);
CREATE INDEX memories_by_namespace ON memories (namespace, createdAt DESC, id DESC);
CREATE INDEX memories_latest_by_namespace ON memories (namespace, createdAt DESC, id DESC) WHERE isLatest = 1;
CREATE INDEX memories_by_namespace_type ON memories (namespace, type, createdAt DESC, id DESC);
CREATE INDEX memories_by_type ON memories (type, createdAt DESC, id DESC);
CREATE INDEX memories_by_creator ON memories (createdBy, type, createdAt DESC, id DESC);
CREATE INDEX memories_expiring ON memories (expiresAt) WHERE expiresAt IS NOT NULL;
CREATE INDEX memories_by_time ON memories (createdAt DESC, id DESC);  -- time-window scans (improvisation_digest)

CREATE VIRTUAL TABLE memories_fts USING fts5 (
    content, nsKey, content = 'memories', content_rowid = 'seq', tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content, nsKey) VALUES (new.seq, new.content, new.nsKey);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content, nsKey) VALUES ('delete', old.seq, old.content, old.nsKey);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF content, namespace ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content, nsKey) VALUES ('delete', old.seq, old.content, old.nsKey);
    INSERT INTO memories_fts (rowid, content, nsKey) VALUES (new.seq, new.content, new.nsKey);
END;

-- Embedding work queue: one row per memory whose vector is missing or stale. Rows are written by
-- triggers, so every way a memory is inserted (tools, imports) enqueues its embedding in the same
-- transaction. Workers claim rows with a lease (leaseOwner, leaseUntil) so processes sharing the
-- file cooperate; a failure bumps `attempts` and pushes `nextAttemptAt` back (backoff).
CREATE TABLE embeddingJobs (
    seq           INTEGER PRIMARY KEY,
    memorySeq     INTEGER NOT NULL UNIQUE REFERENCES memories (seq) ON DELETE CASCADE,
    attempts      INTEGER NOT NULL DEFAULT 0,
    nextAttemptAt INTEGER NOT NULL,
    leaseOwner    TEXT,
    leaseUntil    INTEGER,
    lastError     TEXT,
    createdAt     INTEGER NOT NULL
);
CREATE INDEX embeddingJobs_due ON embeddingJobs (nextAttemptAt, seq);

CREATE TRIGGER memories_embed_insert AFTER INSERT ON memories BEGIN
    INSERT INTO embeddingJobs (memorySeq, nextAttemptAt, createdAt) VALUES (new.seq, new.createdAt, new.createdAt)
    ON CONFLICT (memorySeq) DO NOTHING;
END;
CREATE TRIGGER memories_embed_update AFTER UPDATE OF content, namespace ON memories BEGIN
    INSERT INTO embeddingJobs (memorySeq, nextAttemptAt, createdAt) VALUES (new.seq, new.updatedAt, new.updatedAt)
    ON CONFLICT (memorySeq) DO UPDATE SET attempts = 0, nextAttemptAt = excluded.nextAttemptAt,
        leaseOwner = NULL, leaseUntil = NULL, lastError = NULL;
END;
