-- Version 4: team records — diary, briefing notes, component registry, mandates, business units.
-- Conventions as in schema.sql: `seq` internal key, `id` prefixed text id, camelCase columns equal
-- to wire names, ms timestamps, arrays/objects as JSON text.

-- Daily logs, one per (orchestrator, date); write_diary upserts on that key.
CREATE TABLE diary (
    seq          INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    date         TEXT NOT NULL,          -- YYYY-MM-DD
    orchestrator TEXT NOT NULL,
    instanceId   TEXT,
    content      TEXT NOT NULL,
    highlights   TEXT,                   -- JSON string[]
    blockers     TEXT,                   -- JSON string[]
    createdAt    INTEGER NOT NULL,
    updatedAt    INTEGER NOT NULL,
    UNIQUE (orchestrator, date)
);
CREATE INDEX diary_by_date ON diary (date DESC, id DESC);

CREATE TABLE briefingNotes (
    seq             INTEGER PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    title           TEXT NOT NULL,
    topic           TEXT NOT NULL,
    participants    TEXT NOT NULL,       -- JSON string[]
    content         TEXT NOT NULL,
    decisions       TEXT,                -- JSON string[]
    linkedMemoryIds TEXT,                -- JSON string[] (ids of rows in memories)
    createdBy       TEXT NOT NULL,
    updatedBy       TEXT,
    createdAt       INTEGER NOT NULL,
    updatedAt       INTEGER NOT NULL
);
CREATE INDEX briefings_by_time ON briefingNotes (createdAt DESC, id DESC);
CREATE INDEX briefings_by_topic ON briefingNotes (topic, createdAt DESC, id DESC);
CREATE INDEX briefings_by_updated ON briefingNotes (updatedAt);

CREATE VIRTUAL TABLE briefingNotes_fts USING fts5 (
    title, content, decisions,
    content = 'briefingNotes', content_rowid = 'seq', tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER briefingNotes_fts_insert AFTER INSERT ON briefingNotes BEGIN
    INSERT INTO briefingNotes_fts (rowid, title, content, decisions)
    VALUES (new.seq, new.title, new.content, new.decisions);
END;
CREATE TRIGGER briefingNotes_fts_delete AFTER DELETE ON briefingNotes BEGIN
    INSERT INTO briefingNotes_fts (briefingNotes_fts, rowid, title, content, decisions)
    VALUES ('delete', old.seq, old.title, old.content, old.decisions);
END;
CREATE TRIGGER briefingNotes_fts_update AFTER UPDATE OF title, content, decisions ON briefingNotes BEGIN
    INSERT INTO briefingNotes_fts (briefingNotes_fts, rowid, title, content, decisions)
    VALUES ('delete', old.seq, old.title, old.content, old.decisions);
    INSERT INTO briefingNotes_fts (rowid, title, content, decisions)
    VALUES (new.seq, new.title, new.content, new.decisions);
END;

-- The component registry: one row per (name, type) holding the latest revision, plus every
-- revision ever stored in componentRevisions (the byte-for-byte recovery surface).
CREATE TABLE components (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL,
    type        TEXT NOT NULL,           -- agent | skill | hook | plugin
    team        TEXT,
    project     TEXT,
    version     TEXT,                    -- the caller's label, e.g. 1.0.0
    revision    INTEGER NOT NULL,        -- 1, 2, 3 … one per stored content change
    content     TEXT NOT NULL,
    contentHash TEXT NOT NULL,           -- sha256 hex of the UTF-8 content
    size        INTEGER NOT NULL,        -- bytes of the UTF-8 content
    createdBy   TEXT NOT NULL,
    updatedBy   TEXT,
    createdAt   INTEGER NOT NULL,
    updatedAt   INTEGER NOT NULL,
    UNIQUE (name, type)
);
CREATE INDEX components_by_time ON components (createdAt DESC, id DESC);
CREATE INDEX components_by_type ON components (type, createdAt DESC, id DESC);
CREATE INDEX components_by_team ON components (team, createdAt DESC, id DESC);

CREATE TABLE componentRevisions (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    componentId TEXT NOT NULL REFERENCES components (id) ON DELETE CASCADE,
    revision    INTEGER NOT NULL,
    version     TEXT,
    content     TEXT NOT NULL,
    contentHash TEXT NOT NULL,
    size        INTEGER NOT NULL,
    createdBy   TEXT NOT NULL,
    createdAt   INTEGER NOT NULL,
    UNIQUE (componentId, revision)
);
CREATE INDEX component_revisions_by_version ON componentRevisions (componentId, version, revision DESC);

-- Substring search over name and team (trigram: `conv` finds `dev-convex-expert`).
CREATE VIRTUAL TABLE components_fts USING fts5 (
    name, team, content = 'components', content_rowid = 'seq', tokenize = 'trigram'
);
CREATE TRIGGER components_fts_insert AFTER INSERT ON components BEGIN
    INSERT INTO components_fts (rowid, name, team) VALUES (new.seq, new.name, new.team);
END;
CREATE TRIGGER components_fts_delete AFTER DELETE ON components BEGIN
    INSERT INTO components_fts (components_fts, rowid, name, team) VALUES ('delete', old.seq, old.name, old.team);
END;
CREATE TRIGGER components_fts_update AFTER UPDATE OF name, team ON components BEGIN
    INSERT INTO components_fts (components_fts, rowid, name, team) VALUES ('delete', old.seq, old.name, old.team);
    INSERT INTO components_fts (rowid, name, team) VALUES (new.seq, new.name, new.team);
END;

CREATE TABLE mandates (
    seq                INTEGER PRIMARY KEY,
    id                 TEXT NOT NULL UNIQUE,
    requestedBy        TEXT NOT NULL,
    fulfilledBy        TEXT NOT NULL,
    service            TEXT NOT NULL,
    budget             NUMERIC NOT NULL,
    status             TEXT NOT NULL,    -- requested | accepted | in_progress | delivered | settled
    spent              NUMERIC NOT NULL DEFAULT 0,   -- sum of mandateSpending.amount
    finalCost          NUMERIC,
    spendingLimits     TEXT,             -- JSON {maxPerTransaction?, maxPerPeriod?, periodDays?}
    approvedCategories TEXT,             -- JSON string[]
    acceptedAt         INTEGER,
    startedAt          INTEGER,
    deliveredAt        INTEGER,
    settledAt          INTEGER,
    settledBy          TEXT,
    updatedBy          TEXT,
    createdAt          INTEGER NOT NULL,
    updatedAt          INTEGER NOT NULL
);
CREATE INDEX mandates_by_time ON mandates (createdAt DESC, id DESC);
CREATE INDEX mandates_by_requester ON mandates (requestedBy, createdAt DESC, id DESC);
CREATE INDEX mandates_by_fulfiller ON mandates (fulfilledBy, createdAt DESC, id DESC);
CREATE INDEX mandates_by_status ON mandates (status, createdAt DESC, id DESC);

-- Spending recorded against a mandate (update_mandate `spend`); the per-period check sums it.
CREATE TABLE mandateSpending (
    seq        INTEGER PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    mandateId  TEXT NOT NULL REFERENCES mandates (id) ON DELETE CASCADE,
    amount     NUMERIC NOT NULL,
    category   TEXT,
    note       TEXT,
    recordedBy TEXT NOT NULL,
    createdAt  INTEGER NOT NULL
);
CREATE INDEX mandate_spending_by_time ON mandateSpending (mandateId, createdAt);

CREATE TABLE businessUnits (
    seq                INTEGER PRIMARY KEY,
    id                 TEXT NOT NULL UNIQUE,
    name               TEXT NOT NULL COLLATE NOCASE UNIQUE,
    description        TEXT NOT NULL,
    purpose            TEXT NOT NULL,
    domain             TEXT,
    orchestratorId     TEXT NOT NULL,
    status             TEXT NOT NULL,    -- idea | building | live | revenue
    businessModel      TEXT,
    targetCustomers    TEXT,
    services           TEXT,             -- JSON string[]
    pricing            TEXT,
    revenueProjections TEXT,             -- JSON object
    coreTeam           TEXT,             -- JSON object
    managementFee      NUMERIC NOT NULL DEFAULT 10,
    createdBy          TEXT NOT NULL,
    updatedBy          TEXT,
    createdAt          INTEGER NOT NULL,
    updatedAt          INTEGER NOT NULL
);
CREATE INDEX bus_by_time ON businessUnits (createdAt DESC, id DESC);
CREATE INDEX bus_by_orchestrator ON businessUnits (orchestratorId, createdAt DESC, id DESC);
CREATE INDEX bus_by_status ON businessUnits (status, createdAt DESC, id DESC);
