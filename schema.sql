-- vantage-peers schema, version 1.
-- Later changes are numbered migrations in vantage_peers/db/migrations/NNN_name.sql.
-- Conventions: every table has `seq INTEGER PRIMARY KEY` (internal, never exposed; stable under
-- VACUUM so FTS5 external content and vec0 rows can key on it) and `id TEXT UNIQUE` (the opaque,
-- prefixed id agents see). Timestamps are Unix milliseconds. Arrays and objects are JSON text.

-- Key/value facts about this file (embedding model in use, seeds applied, ...).
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- Cooperative leases so that processes sharing the file split background work instead of
-- duplicating it.
CREATE TABLE leases (
    name      TEXT PRIMARY KEY,
    owner     TEXT NOT NULL,
    expiresAt INTEGER NOT NULL
);

-- Orchestrators (roles). One row per orchestrator id; broadcast resolves to these.
CREATE TABLE profiles (
    seq            INTEGER PRIMARY KEY,
    id             TEXT NOT NULL UNIQUE,
    orchestratorId TEXT NOT NULL UNIQUE,
    name           TEXT,
    static         TEXT,            -- JSON {role, workspace, capabilities[]}
    createdAt      INTEGER NOT NULL,
    updatedAt      INTEGER NOT NULL
);

-- Running copies of an orchestrator (presence). instanceId '' is the role-level presence.
CREATE TABLE instances (
    seq            INTEGER PRIMARY KEY,
    id             TEXT NOT NULL UNIQUE,
    orchestratorId TEXT NOT NULL,
    instanceId     TEXT NOT NULL DEFAULT '',
    summary        TEXT,
    currentTask    TEXT,
    sessionCount   INTEGER NOT NULL DEFAULT 0,
    lastSeen       INTEGER NOT NULL,
    createdAt      INTEGER NOT NULL,
    UNIQUE (orchestratorId, instanceId)
);
CREATE INDEX instances_by_last_seen ON instances (lastSeen DESC, id DESC);
CREATE INDEX instances_by_instance ON instances (instanceId);

CREATE TABLE messages (
    seq            INTEGER PRIMARY KEY,
    id             TEXT NOT NULL UNIQUE,
    sender         TEXT NOT NULL,     -- `from` on the wire
    fromInstanceId TEXT,
    channel        TEXT NOT NULL,
    instanceId     TEXT,
    content        TEXT NOT NULL,
    sessionDay     INTEGER,
    tenantId       TEXT,
    createdAt      INTEGER NOT NULL
);
CREATE INDEX messages_by_time ON messages (createdAt DESC, id DESC);
CREATE INDEX messages_by_sender ON messages (sender, createdAt DESC);
CREATE INDEX messages_by_channel ON messages (channel, createdAt DESC);

CREATE TABLE messageReceipts (
    seq                 INTEGER PRIMARY KEY,
    id                  TEXT NOT NULL UNIQUE,
    messageId           TEXT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    recipient           TEXT NOT NULL,
    recipientInstanceId TEXT,
    tenantId            TEXT,
    readAt              INTEGER,
    createdAt           INTEGER NOT NULL
);
-- One receipt per recipient (and targeted instance) per message.
CREATE UNIQUE INDEX receipts_one_per_recipient
    ON messageReceipts (messageId, recipient, coalesce(recipientInstanceId, ''));
-- check_messages reads unread receipts of one recipient, oldest first.
CREATE INDEX receipts_unread ON messageReceipts (recipient, createdAt, id) WHERE readAt IS NULL;
CREATE INDEX receipts_by_message ON messageReceipts (messageId);

CREATE VIRTUAL TABLE messages_fts USING fts5 (
    content, content = 'messages', content_rowid = 'seq', tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (new.seq, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.seq, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.seq, old.content);
    INSERT INTO messages_fts (rowid, content) VALUES (new.seq, new.content);
END;
