-- Version 23 (issue #35): each vector table records the model that made its vectors and their
-- dimension. One table holds one model's vectors (search/vectors.py refuses to write another's into
-- it), and a query vector is compared only with a table recorded for the model that embedded it, so
-- no search mixes two models. Files made before carry the file-wide `meta` record
-- (`embedding.model`, `embedding.dimensions`) over to every vector table it covered.
CREATE TABLE vectorModels (
    name       TEXT PRIMARY KEY,        -- the vector table: 'memories_vec', 'fixPatterns_vec'
    model      TEXT NOT NULL,           -- the embedding model id, e.g. 'all-MiniLM-L6-v2-int8'
    dimensions INTEGER NOT NULL,
    createdAt  INTEGER NOT NULL         -- Unix ms; 0 for a record carried over from `meta`
) WITHOUT ROWID;
INSERT INTO vectorModels (name, model, dimensions, createdAt)
SELECT t.name, m.value, CAST(d.value AS INTEGER), 0
FROM meta m
JOIN meta d ON d.key = 'embedding.dimensions'
JOIN (SELECT 'memories_vec' AS name UNION ALL SELECT 'fixPatterns_vec' AS name) t ON 1 = 1
WHERE m.key = 'embedding.model';
