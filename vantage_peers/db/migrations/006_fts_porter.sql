-- Keyword search stems English (porter over unicode61): "deploy" finds "deployed" and "deployment".
-- Every word-tokenized FTS5 index is dropped and recreated with the porter tokenizer, then rebuilt
-- from its external-content table: no source row changes, and the sync triggers (which name the
-- index, not its definition) keep working unchanged. components_fts keeps `trigram` (substring
-- search over names). Identifiers still match exactly: a query is tokenized and stemmed the same
-- way as the text, and tokens ending in a digit (hex namespace keys, SHAs, ids) are never stemmed.

DROP TABLE messages_fts;
CREATE VIRTUAL TABLE messages_fts USING fts5 (
    content, content = 'messages', content_rowid = 'seq', tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');

DROP TABLE memories_fts;
CREATE VIRTUAL TABLE memories_fts USING fts5 (
    content, nsKey, content = 'memories', content_rowid = 'seq', tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO memories_fts (memories_fts) VALUES ('rebuild');

DROP TABLE tasks_fts;
CREATE VIRTUAL TABLE tasks_fts USING fts5 (
    title, description, content = 'tasks', content_rowid = 'seq', tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO tasks_fts (tasks_fts) VALUES ('rebuild');

DROP TABLE briefingNotes_fts;
CREATE VIRTUAL TABLE briefingNotes_fts USING fts5 (
    title, content, decisions,
    content = 'briefingNotes', content_rowid = 'seq', tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO briefingNotes_fts (briefingNotes_fts) VALUES ('rebuild');

DROP TABLE fixPatterns_fts;
CREATE VIRTUAL TABLE fixPatterns_fts USING fts5 (
    symptom, rootCause, tags, stack,
    content = 'fixPatterns', content_rowid = 'seq', tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO fixPatterns_fts (fixPatterns_fts) VALUES ('rebuild');
