"""SQLite's virtual tables in PostgreSQL (the translator's part, db/pgschema.py): FTS5 indexes become
`<table>_fts` tsvector side tables (`CALL vp_fts_index(…)`, pg/prelude.sql) or, tokenized `trigram`, a
view declaring the columns that search/pg_fts.py searches by substring; their sync triggers are
absorbed (the `UPDATE OF` columns are the side table's watched ones) and `('rebuild')` refills the side
table. sqlite-vec `vec0` tables become pgvector tables with an HNSW index, as search/pg_vectors.py
makes them at run time."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .dialect import _call_args
from .pgschema_text import IDENT as _IDENT
from .pgschema_text import Untranslatable
from .pgschema_text import words as _words

HNSW_MAX_DIMS = 2000  # pgvector indexes at most this many dimensions; a larger model is searched exactly
# The HNSW graph of every vector table (here and search/pg_vectors.py). pgvector's defaults (m 16,
# ef_construction 64) reached recall@10 0.86 against exact at ef_search 400 on 100k 384-d vectors
# (benchmarks/recall_backends.py --big): the graph, not the search width, was the limit.
HNSW_WITH = "WITH (m = 32, ef_construction = 200)"


@dataclass
class FtsIndex:
    table: str  # the content table: the side table is `<table>_fts`
    columns: list[str]
    watched: list[str] = field(default_factory=list)
    trigram: bool = False


class VirtualTables:
    """The Translator's FTS5 and vec0 statements; `fts`/`watched` are its state across steps."""

    fts: dict[str, FtsIndex]
    watched: dict[str, list[str]]  # FTS table -> its last sync trigger's UPDATE OF columns
    column: Callable[[str, str, set[str]], str]

    def virtual_table(self, statement: str, later: list[str]) -> list[str]:
        m = re.match(rf"CREATE\s+VIRTUAL\s+TABLE\s+({_IDENT})\s+USING\s+(\w+)\s*\(", statement, re.IGNORECASE)
        if m is None:
            raise Untranslatable(statement, "a virtual table without arguments")
        name, module = m.group(1), m.group(2).lower()
        args, _ = _call_args(statement, m.end() - 1)
        if module == "fts5":
            return self.fts5(name, args, statement, later)
        if module == "vec0":
            return self.vec0(name, args, statement)
        raise Untranslatable(statement, f"virtual table module {module}")

    def fts5(self, name: str, args: list[str], statement: str, later: list[str]) -> list[str]:
        options = dict(re.match(r"(\w+)\s*=\s*'([^']*)'$", a).groups() for a in args if "=" in a)
        columns = [a for a in args if "=" not in a]
        table = options.get("content")
        if not table or options.get("content_rowid") != "seq" or name.lower() != f"{table}_fts".lower():
            raise Untranslatable(statement, "an FTS5 table must index its content table `T` (content_rowid "
                                            "'seq') and be named T_fts")
        if any(not re.fullmatch(_IDENT, c) or " " in c for c in columns) or not 1 <= len(columns) <= 4:
            raise Untranslatable(statement, "FTS5 columns must be 1 to 4 plain column names")
        tokenize = options.get("tokenize", "unicode61")
        trigram = tokenize.split()[0] == "trigram"
        if not trigram and not set(tokenize.split()) <= {"porter", "unicode61", "remove_diacritics", "2", "1", "0"}:
            raise Untranslatable(statement, f"FTS5 tokenizer {tokenize!r}")
        # A table dropped and made again (006: a new tokenizer) keeps the sync triggers it had.
        watched = self._watched(name, later) or self.watched.get(name.lower(), [])
        if not trigram and not watched:
            raise Untranslatable(statement, f"FTS5 table {name} has no `AFTER UPDATE OF …` sync trigger")
        self.fts[name.lower()] = FtsIndex(table, columns, watched, trigram)
        self.watched[name.lower()] = watched
        if trigram:
            return [f"CREATE VIEW {name} AS SELECT seq, {', '.join(columns)} FROM {table}",
                    f"COMMENT ON VIEW {name} IS 'trigram {' '.join(columns)}'"]
        return [f"CALL vp_fts_index('{table}', '{{{','.join(columns)}}}', '{{{','.join(watched)}}}')"]

    def _watched(self, fts_name: str, statements: list[str]) -> list[str]:
        for s in statements:
            trig = self._trigger_head(s)
            if trig and trig["event"].upper().startswith("UPDATE OF") and self._fts_target(trig["body"]) == \
                    fts_name.lower():
                return [c.strip() for c in trig["event"][len("UPDATE OF"):].split(",")]
        return []

    def vec0(self, name: str, args: list[str], statement: str) -> list[str]:
        columns, dims, has_key = [], None, False
        for arg in args:
            vec = re.fullmatch(r"(\w+)\s+float\s*\[\s*(\d+)\s*\](.*)", arg, re.IGNORECASE | re.DOTALL)
            if vec:
                if dims is not None or vec.group(3).strip():
                    raise Untranslatable(statement, "one float[N] vector column with no options")
                dims = int(vec.group(2))
                columns.append(f"{vec.group(1)} vector({dims}) NOT NULL")
                continue
            if "=" in arg or "[" in arg:
                raise Untranslatable(statement, f"vec0 argument {arg!r}")
            plain = re.sub(r"\s+PARTITION\s+KEY\b", "", arg.lstrip("+"), flags=re.IGNORECASE)
            if re.search(r"\bPRIMARY\s+KEY\b", plain, re.IGNORECASE):
                has_key = True
                plain = re.sub(r"\bINTEGER\b", "BIGINT", plain, flags=re.IGNORECASE)
                columns.append(plain)
            else:
                columns.append(self.column(plain, statement, set()))
        if dims is None:
            raise Untranslatable(statement, "a vec0 table without a float[N] column")
        if not has_key:
            columns.insert(0, "seq BIGINT PRIMARY KEY")
        vector = next(c.split()[0] for c in columns if "vector(" in c)
        out = [f"CREATE TABLE {name} ({', '.join(columns)})"]
        if dims <= HNSW_MAX_DIMS:
            out.append(f"CREATE INDEX {name}_hnsw ON {name} USING hnsw ({vector} vector_cosine_ops) {HNSW_WITH}")
        return out

    @staticmethod
    def _trigger_head(statement: str) -> dict[str, str] | None:
        m = re.match(rf"CREATE\s+TRIGGER\s+(IF\s+NOT\s+EXISTS\s+)?({_IDENT})\s+(BEFORE|AFTER|INSTEAD\s+OF)?\s*"
                     rf"(INSERT|DELETE|UPDATE(?:\s+OF\s+[\w\s,]+?)?)\s+ON\s+({_IDENT})\s+(FOR\s+EACH\s+ROW\s+)?"
                     rf"(?:WHEN\s+(.*?)\s+)?BEGIN\b(.*)\bEND$", statement, re.IGNORECASE | re.DOTALL)
        if m is None:
            return None
        return {"name": m.group(2), "when": (m.group(3) or "BEFORE").upper(), "event": _words(m.group(4)),
                "table": m.group(5), "condition": m.group(7) or "", "body": m.group(8).strip()}

    def _fts_target(self, body: str) -> str | None:
        """The FTS5 table a sync trigger's body writes, when every statement of it writes that one."""
        targets = {m.group(1).lower() for m in re.finditer(r"INSERT\s+INTO\s+(\w+)", body, re.IGNORECASE)}
        statements = [s for s in body.split(";") if s.strip()]
        if len(targets) == 1 and all(re.match(r"\s*INSERT\s+INTO\s", s, re.IGNORECASE) for s in statements):
            target = next(iter(targets))
            if target.endswith("_fts"):
                return target
        return None

    def fts_command(self, statement: str) -> list[str] | None:
        """`INSERT INTO t_fts (t_fts) VALUES ('rebuild')` and the like; None for another INSERT."""
        m = re.match(rf"INSERT\s+INTO\s+({_IDENT})\s*\(\s*({_IDENT})\s*\)\s*VALUES\s*\(\s*'(\w+)'\s*\)$",
                     statement, re.IGNORECASE)
        if not (m and m.group(1).lower() in self.fts and m.group(1).lower() == m.group(2).lower()):
            target = re.match(rf"INSERT\s+(?:OR\s+\w+\s+)?INTO\s+({_IDENT})", statement, re.IGNORECASE)
            if target and target.group(1).lower() in self.fts:
                raise Untranslatable(statement, "writing an FTS5 table outside its sync triggers")
            return None
        index = self.fts[m.group(1).lower()]
        if m.group(3) == "optimize" or index.trigram:
            return []
        if m.group(3) != "rebuild":
            raise Untranslatable(statement, f"FTS5 command {m.group(3)!r}")
        cols = index.columns
        return [f"INSERT INTO {index.table}_fts (seq, doc, len) SELECT seq, vp_fts_doc({', '.join(cols)}), "
                f"{' + '.join(f'vp_fts_length({c})' for c in cols)} FROM {index.table} "
                "ON CONFLICT (seq) DO UPDATE SET doc = excluded.doc, len = excluded.len"]
