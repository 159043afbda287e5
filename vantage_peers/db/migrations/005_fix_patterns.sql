-- Version 5: the fix-pattern knowledge base — patterns, their attempts, a full-text index and an
-- embedding job queue. The vector table `fixPatterns_vec` (sqlite-vec vec0) is created at run time
-- on the first embedding, like `memories_vec` (see vantage_peers/domains/fix_patterns/embedding.py).
CREATE TABLE fixPatterns (
    seq                INTEGER PRIMARY KEY,
    id                 TEXT NOT NULL UNIQUE,
    symptom            TEXT NOT NULL,
    rootCause          TEXT NOT NULL,
    validatedFix       TEXT,
    validatedBy        TEXT,             -- who set validatedFix (attempt author or validate_fix caller)
    validatedAt        INTEGER,
    validatedAttemptId TEXT,             -- the worked attempt that set validatedFix automatically
    files              TEXT,             -- JSON string[]
    tags               TEXT NOT NULL,    -- JSON string[]
    stack              TEXT NOT NULL,    -- JSON string[]
    sourceProject      TEXT NOT NULL,
    linkedIssueIds     TEXT,             -- JSON string[]
    severity           TEXT CHECK (severity IN ('critical', 'major', 'minor')),
    attemptCount       INTEGER NOT NULL DEFAULT 0,
    createdBy          TEXT NOT NULL,
    createdAt          INTEGER NOT NULL,
    updatedAt          INTEGER NOT NULL
);
CREATE INDEX fixPatterns_by_time ON fixPatterns (createdAt DESC, id DESC);
CREATE INDEX fixPatterns_by_project ON fixPatterns (sourceProject, createdAt DESC, id DESC);

-- Attempts are their own table (unbounded), newest read through (patternId, createdAt).
CREATE TABLE fixAttempts (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    patternId   TEXT NOT NULL REFERENCES fixPatterns (id) ON DELETE CASCADE,
    description TEXT NOT NULL,
    "commit"    TEXT,
    worked      INTEGER NOT NULL,
    why         TEXT NOT NULL,
    createdBy   TEXT NOT NULL,
    createdAt   INTEGER NOT NULL
);
CREATE INDEX fixAttempts_by_pattern ON fixAttempts (patternId, createdAt, id);

-- Keyword ranker: symptom and root cause (what search by meaning covers) plus tags and stack.
CREATE VIRTUAL TABLE fixPatterns_fts USING fts5 (
    symptom, rootCause, tags, stack,
    content = 'fixPatterns', content_rowid = 'seq', tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER fixPatterns_fts_insert AFTER INSERT ON fixPatterns BEGIN
    INSERT INTO fixPatterns_fts (rowid, symptom, rootCause, tags, stack)
    VALUES (new.seq, new.symptom, new.rootCause, new.tags, new.stack);
END;
CREATE TRIGGER fixPatterns_fts_delete AFTER DELETE ON fixPatterns BEGIN
    INSERT INTO fixPatterns_fts (fixPatterns_fts, rowid, symptom, rootCause, tags, stack)
    VALUES ('delete', old.seq, old.symptom, old.rootCause, old.tags, old.stack);
END;
CREATE TRIGGER fixPatterns_fts_update AFTER UPDATE OF symptom, rootCause, tags, stack ON fixPatterns BEGIN
    INSERT INTO fixPatterns_fts (fixPatterns_fts, rowid, symptom, rootCause, tags, stack)
    VALUES ('delete', old.seq, old.symptom, old.rootCause, old.tags, old.stack);
    INSERT INTO fixPatterns_fts (rowid, symptom, rootCause, tags, stack)
    VALUES (new.seq, new.symptom, new.rootCause, new.tags, new.stack);
END;

-- Embedding queue, same shape as embeddingJobs (the worker serves both, see search/corpus.py):
-- a pattern's insert, or a change of the embedded text, enqueues it in the same transaction.
CREATE TABLE fixPatternEmbeddingJobs (
    seq           INTEGER PRIMARY KEY,
    patternSeq    INTEGER NOT NULL UNIQUE REFERENCES fixPatterns (seq) ON DELETE CASCADE,
    attempts      INTEGER NOT NULL DEFAULT 0,
    nextAttemptAt INTEGER NOT NULL,
    leaseOwner    TEXT,
    leaseUntil    INTEGER,
    lastError     TEXT,
    createdAt     INTEGER NOT NULL
);
CREATE INDEX fixPatternEmbeddingJobs_due ON fixPatternEmbeddingJobs (nextAttemptAt, seq);

CREATE TRIGGER fixPatterns_embed_insert AFTER INSERT ON fixPatterns BEGIN
    INSERT INTO fixPatternEmbeddingJobs (patternSeq, nextAttemptAt, createdAt)
    VALUES (new.seq, new.createdAt, new.createdAt)
    ON CONFLICT (patternSeq) DO NOTHING;
END;
CREATE TRIGGER fixPatterns_embed_update AFTER UPDATE OF symptom, rootCause ON fixPatterns BEGIN
    INSERT INTO fixPatternEmbeddingJobs (patternSeq, nextAttemptAt, createdAt)
    VALUES (new.seq, new.updatedAt, new.updatedAt)
    ON CONFLICT (patternSeq) DO UPDATE SET attempts = 0, nextAttemptAt = excluded.nextAttemptAt,
        leaseOwner = NULL, leaseUntil = NULL, lastError = NULL;
END;
