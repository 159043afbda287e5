"""How fix patterns are embedded: their corpus for the shared embedding worker, and their vec0 table
(a pgvector table on PostgreSQL).

The embedded text is the symptom and the root cause (what `search_fix_patterns` searches by
meaning). `sourceProject` is a vec0 metadata column, so a `project`-filtered KNN filters inside the
index instead of after it; it is not a partition key because patterns are few and projects many
(vec0 allocates a whole chunk per partition). The triggers are created with the table: a change of
the embedded text drops the stale vector (the migration's trigger re-queues the pattern), a hard
delete drops the vector, a project change moves its metadata.
"""

from __future__ import annotations

from ...search.corpus import Corpus
from ...search.vectors import VecTable, stale_triggers

VEC_TABLE = "fixPatterns_vec"
_STALE, _PG_STALE = stale_triggers("fixPatterns", VEC_TABLE, "symptom, rootCause")

VEC = VecTable(
    name=VEC_TABLE,
    label="fix pattern",
    columns_ddl="sourceProject TEXT",
    columns=("sourceProject",),
    triggers={
        "fixPatterns_vec_project": f"""
            CREATE TRIGGER fixPatterns_vec_project AFTER UPDATE OF sourceProject ON fixPatterns BEGIN
                UPDATE {VEC_TABLE} SET sourceProject = new.sourceProject WHERE rowid = new.seq;
            END""",
        **_STALE,
    },
    pg_triggers={  # PostgreSQL (search/pg_vectors.py): plpgsql functions named like their triggers
        "fixPatterns_vec_project": f"""
            CREATE FUNCTION fixPatterns_vec_project() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
                UPDATE {VEC_TABLE} SET sourceProject = NEW.sourceProject WHERE seq = NEW.seq;
                RETURN NULL;
            END $$;
            CREATE TRIGGER fixPatterns_vec_project AFTER UPDATE OF sourceProject ON fixPatterns
                FOR EACH ROW EXECUTE FUNCTION fixPatterns_vec_project();""",
        **_PG_STALE,
    },
)

# A newline between the two (a literal one: SQLite has char(10), PostgreSQL chr(10)).
TEXT_SQL = "symptom || '\n' || rootCause"

CORPUS = Corpus(
    name="fix patterns", source="fixPatterns", text_sql=TEXT_SQL, jobs="fixPatternEmbeddingJobs",
    key="patternSeq", vec=VEC, meta_sql=("sourceProject",),
)
