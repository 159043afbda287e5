"""SQLite's schema and migrations turned into PostgreSQL's at migrate time (issue #33: one schema source).

The SQLite files (`schema.sql`, `db/migrations/NNN_*.sql`) are the only DDL written by hand. Each
step is translated here, statement by statement, with every difference declared once below:

- types: INTEGER is BIGINT (Unix ms need 64 bits) and `INTEGER PRIMARY KEY` an identity column;
  REAL/NUMERIC/FLOAT are DOUBLE PRECISION; BLOB is BYTEA; a `COLLATE NOCASE` TEXT is CITEXT;
  `WITHOUT ROWID`/`STRICT` and AUTOINCREMENT have no counterpart (dropped);
- expressions: the functions of `_FUNCTIONS` (hex, json_valid, ifnull, strftime('%s','now')…),
  a VIRTUAL generated column is STORED, `INSERT OR IGNORE` is `ON CONFLICT DO NOTHING`;
- FTS5 virtual tables are `<table>_fts` tsvector side tables with a GIN index and a sync trigger
  (`CALL vp_fts_index(…)`, pg/prelude.sql); a `trigram` one is a view that declares its columns
  (search/pg_fts.py searches by substring). SQLite's sync triggers of an FTS table are absorbed (their
  `UPDATE OF` columns become the side table's watched columns); `('rebuild')` refills the side table;
- sqlite-vec `vec0` tables are pgvector tables with an HNSW index (as search/pg_vectors.py makes them);
- other triggers become a plpgsql function `<trigger>_fn` and a `FOR EACH ROW` trigger.

The virtual tables are translated in pgschema_virtual.py, the script text handled in pgschema_text.py.
A statement with no declared translation raises `Untranslatable` naming it: nothing is skipped
silently. PostgreSQL-only DDL lives in `pg/prelude.sql` (before step 1) and `pg/additions/NNN_*.sql`
(right after step NNN), see `postgres_steps`.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

from .dialect import _call_args, _rewrite_calls, _split_literals
from .pgschema_text import IDENT as _IDENT
from .pgschema_text import Untranslatable, split_statements, strip_comments
from .pgschema_text import words as _words
from .pgschema_virtual import FtsIndex, VirtualTables

__all__ = ["FtsIndex", "Translator", "Untranslatable", "postgres_steps", "split_statements", "strip_comments"]


# Helper functions a translated expression may call: created (OR REPLACE, so a database that already has
# them is unchanged) at the top of the first step that uses one, so any later migration can use them too.
_HELPERS = {
    "vp_hex": "CREATE OR REPLACE FUNCTION vp_hex(value text) RETURNS text LANGUAGE sql IMMUTABLE STRICT "
              "PARALLEL SAFE\n    RETURN upper(encode(convert_to(value, 'UTF8'), 'hex'))",  # SQLite's hex() of text
    "vp_json_valid": "CREATE OR REPLACE FUNCTION vp_json_valid(value text) RETURNS boolean LANGUAGE plpgsql "
                     "IMMUTABLE STRICT PARALLEL SAFE AS $$\nBEGIN\n    PERFORM value::jsonb;\n    RETURN true;\n"
                     "EXCEPTION WHEN others THEN\n    RETURN false;\nEND $$",
}
# SQLite function -> (PostgreSQL function, helper it needs or None).
_FUNCTIONS = {"hex": ("vp_hex", "vp_hex"), "json_valid": ("vp_json_valid", "vp_json_valid"),
              "ifnull": ("coalesce", None), "instr": ("strpos", None)}
_NOW_S = "(floor(extract(epoch FROM clock_timestamp()))::bigint)"
_UNSUPPORTED_FUNCTIONS = ("json_extract", "json_each", "datetime", "julianday", "date", "time", "printf",
                          "glob", "randomblob", "last_insert_rowid", "changes", "total")
_TYPES = [(r"INT", "BIGINT"), (r"CHAR|CLOB|TEXT", "TEXT"), (r"BLOB", "BYTEA"),
          (r"REAL|FLOA|DOUB|NUMERIC|DECIMAL", "DOUBLE PRECISION"), (r"BOOL", "BIGINT")]
_TABLE_CONSTRAINT = re.compile(r"^(CONSTRAINT|PRIMARY\s+KEY|UNIQUE|CHECK|FOREIGN\s+KEY)\b", re.IGNORECASE)


class Translator(VirtualTables):
    """Translates the steps in order, keeping what a later step needs (the FTS indexes and triggers)."""

    def __init__(self) -> None:
        self.fts: dict[str, FtsIndex] = {}
        self.watched: dict[str, list[str]] = {}  # FTS table -> its last sync trigger's UPDATE OF columns
        self.triggers: dict[str, str] = {}  # trigger -> its table ('' for an absorbed FTS sync trigger)
        self._helpers_made: set[str] = set()

    # -- expressions ---------------------------------------------------------------------------------
    def expr(self, text: str, statement: str, helpers: set[str]) -> str:
        """An expression, default or body statement in PostgreSQL's spelling."""
        for lit, piece in _split_literals(text):
            if not lit:
                for name in _UNSUPPORTED_FUNCTIONS:
                    if re.search(rf"\b{name}\s*\(", piece, re.IGNORECASE):
                        raise Untranslatable(statement, f"function {name}() has no declared translation")

        def strftime(args: list[str], rest: str) -> tuple[str, int]:
            norm = [a.replace(" ", "").lower() for a in args]
            if norm == ["'%s'", "'now'"]:
                return _NOW_S, 0
            raise Untranslatable(statement, f"strftime({', '.join(args)}) has no declared translation")

        def unixepoch(args: list[str], rest: str) -> tuple[str, int]:
            if args in ([], [""], ["'now'"]):
                return _NOW_S, 0
            raise Untranslatable(statement, "unixepoch() of a value has no declared translation")

        text = _rewrite_calls(text, "strftime", strftime)
        text = _rewrite_calls(text, "unixepoch", unixepoch)
        for name, (pg_name, helper) in _FUNCTIONS.items():
            def call(args: list[str], rest: str, pg_name: str = pg_name, helper: str | None = helper):
                if helper:
                    helpers.add(helper)
                return f"{pg_name}({', '.join(args)})", 0
            text = _rewrite_calls(text, name, call)
        pieces = []
        for lit, piece in _split_literals(text):
            if not lit:
                piece = re.sub(r"\s+COLLATE\s+NOCASE\b", "", piece, flags=re.IGNORECASE)
                piece = re.sub(r"\bAS\s+INTEGER\s*\)", "AS BIGINT)", piece, flags=re.IGNORECASE)
                piece = re.sub(r"\bAS\s+REAL\s*\)", "AS DOUBLE PRECISION)", piece, flags=re.IGNORECASE)
                if re.search(r"\bINSERT\s+OR\s+(REPLACE|ABORT|FAIL|ROLLBACK)\b|\bREPLACE\s+INTO\b", piece,
                             re.IGNORECASE):
                    raise Untranslatable(statement, "INSERT OR REPLACE/ABORT/FAIL has no declared translation")
            pieces.append(piece)
        text = "".join(pieces)
        if re.search(r"\bINSERT\s+OR\s+IGNORE\b", text, re.IGNORECASE):
            text = re.sub(r"\bINSERT\s+OR\s+IGNORE\b", "INSERT", text, flags=re.IGNORECASE)
            if re.search(r"\bON\s+CONFLICT\b", text, re.IGNORECASE):
                raise Untranslatable(statement, "INSERT OR IGNORE with an ON CONFLICT clause")
            returning = re.search(r"\bRETURNING\b", text, re.IGNORECASE)
            at = returning.start() if returning else len(text)
            text = f"{text[:at].rstrip()} ON CONFLICT DO NOTHING{' ' + text[at:] if returning else ''}"
        return text

    # -- CREATE TABLE --------------------------------------------------------------------------------
    def column(self, definition: str, statement: str, helpers: set[str]) -> str:
        m = re.match(rf"({_IDENT})\s*(.*)$", definition, re.DOTALL)
        if m is None:
            raise Untranslatable(statement, f"column definition {definition!r}")
        name, rest = m.group(1), m.group(2)
        tm = re.match(r"([A-Za-z]+(?:\s*\(\s*\d+(?:\s*,\s*\d+)?\s*\))?)\s*(.*)$", rest, re.DOTALL)
        declared = tm.group(1) if tm else ""
        if not declared or re.match(r"(NOT|NULL|PRIMARY|UNIQUE|CHECK|DEFAULT|REFERENCES|GENERATED|COLLATE|AS)\b",
                                    declared, re.IGNORECASE):
            raise Untranslatable(statement, f"column {name} has no declared type")
        constraints = tm.group(2) if tm else ""
        pg_type = next((pg for pattern, pg in _TYPES if re.search(pattern, declared, re.IGNORECASE)), None)
        if pg_type is None:
            raise Untranslatable(statement, f"type {declared} of column {name}")
        if re.search(r"\bON\s+CONFLICT\b", constraints, re.IGNORECASE):
            raise Untranslatable(statement, "a column constraint's ON CONFLICT clause")
        collate = re.search(r"\s*\bCOLLATE\s+(\w+)", constraints, re.IGNORECASE)
        if collate:
            kind = collate.group(1).upper()
            if kind == "NOCASE" and pg_type == "TEXT":
                pg_type = "CITEXT"
            elif kind != "BINARY":
                raise Untranslatable(statement, f"COLLATE {kind} of column {name}")
            constraints = constraints[:collate.start()] + constraints[collate.end():]
        if pg_type == "BIGINT" and re.search(r"\bPRIMARY\s+KEY\b", constraints, re.IGNORECASE):
            if re.search(r"\bPRIMARY\s+KEY\s+(ASC|DESC)\b", constraints, re.IGNORECASE):
                raise Untranslatable(statement, "an ordered INTEGER PRIMARY KEY")
            constraints = re.sub(r"\s*\bAUTOINCREMENT\b", "", constraints, flags=re.IGNORECASE)
            constraints = re.sub(r"\bPRIMARY\s+KEY\b", "GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
                                 constraints, flags=re.IGNORECASE)
        generated = re.search(r"\b(?:GENERATED\s+ALWAYS\s+)?AS\s*\(", constraints, re.IGNORECASE)
        if generated and not re.search(r"\bGENERATED\s+BY\s+DEFAULT\b", constraints, re.IGNORECASE):
            args, end = _call_args(constraints, generated.end() - 1)
            tail = re.sub(r"^\s*(VIRTUAL|STORED)\b", "", constraints[end:], flags=re.IGNORECASE)
            constraints = (f"{constraints[:generated.start()]}GENERATED ALWAYS AS "
                           f"({self.expr(args[0], statement, helpers)}) STORED{tail}")
        constraints = self.expr(constraints, statement, helpers) if constraints else ""
        return f"{name} {pg_type}{' ' + constraints.strip() if constraints.strip() else ''}"

    def create_table(self, statement: str, helpers: set[str]) -> str:
        m = re.match(rf"CREATE\s+(TEMP\w*\s+)?TABLE\s+(IF\s+NOT\s+EXISTS\s+)?({_IDENT})\s*\(", statement,
                     re.IGNORECASE)
        if m is None:
            raise Untranslatable(statement, "CREATE TABLE … AS SELECT")
        args, end = _call_args(statement, m.end() - 1)
        options = {o.strip().upper() for o in statement[end:].split(",") if o.strip()}
        if options - {"WITHOUT ROWID", "STRICT"}:
            raise Untranslatable(statement, f"table options {sorted(options)}")
        defs = [self.expr(d, statement, helpers) if _TABLE_CONSTRAINT.match(d) else self.column(d, statement, helpers)
                for d in args]
        head = f"CREATE {(m.group(1) or '').upper()}TABLE {m.group(2) or ''}{m.group(3)}"
        return head + " (\n    " + ",\n    ".join(defs) + "\n)"

    def trigger(self, statement: str, helpers: set[str]) -> list[str]:
        head = self._trigger_head(statement)
        if head is None:
            raise Untranslatable(statement, "trigger form")
        target = self._fts_target(head["body"])
        if target is not None:  # the side table's own trigger (pg/prelude.sql vp_fts_index) keeps it
            if target not in self.fts:
                raise Untranslatable(statement, f"a sync trigger of {target}, which no FTS5 table created")
            self.triggers[head["name"].lower()] = ""
            return []
        if head["when"].startswith("INSTEAD"):
            raise Untranslatable(statement, "INSTEAD OF triggers")
        body = head["body"]
        raises = re.findall(r"SELECT\s+RAISE\s*\(\s*(ABORT|FAIL|ROLLBACK)\s*,\s*('(?:[^']|'')*')\s*\)", body,
                            re.IGNORECASE)
        body = re.sub(r"SELECT\s+RAISE\s*\(\s*(?:ABORT|FAIL|ROLLBACK)\s*,\s*('(?:[^']|'')*')\s*\)",
                      lambda m: f"RAISE EXCEPTION '%', {m.group(1)}", body, flags=re.IGNORECASE)
        if re.search(r"\bRAISE\s*\(", body, re.IGNORECASE) and not raises:
            raise Untranslatable(statement, "RAISE(IGNORE)")
        body = ";\n    ".join(self.expr(s.strip(), statement, helpers) for s in body.split(";") if s.strip())
        result = "NULL" if head["when"] == "AFTER" else ("OLD" if head["event"] == "DELETE" else "NEW")
        name, fn = head["name"], f"{head['name']}_fn"
        when = f" WHEN ({self.expr(head['condition'], statement, helpers)})" if head["condition"] else ""
        self.triggers[name.lower()] = head["table"]
        return [f"CREATE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n    {body};\n"
                f"    RETURN {result};\nEND $$",
                f"CREATE TRIGGER {name} {head['when']} {head['event']} ON {head['table']} FOR EACH ROW{when} "
                f"EXECUTE FUNCTION {fn}()"]

    # -- other statements --------------------------------------------------------------------------
    def drop(self, statement: str) -> list[str]:
        m = re.match(rf"DROP\s+(TABLE|INDEX|TRIGGER|VIEW)\s+(IF\s+EXISTS\s+)?({_IDENT})$", statement, re.IGNORECASE)
        if m is None:
            raise Untranslatable(statement, "DROP form")
        kind, exists, name = m.group(1).upper(), m.group(2) or "", m.group(3)
        if kind == "TABLE" and name.lower() in self.fts:
            index = self.fts.pop(name.lower())
            if index.trigram:
                return [f"DROP VIEW {exists}{name}"]
            return [f"DROP TABLE {exists}{name} CASCADE", f"DROP FUNCTION IF EXISTS {name}_sync() CASCADE"]
        if kind == "TRIGGER":
            table = self.triggers.pop(name.lower(), None)
            if table == "" or (table is None and not exists):
                raise Untranslatable(statement, "dropping a trigger this translation did not create "
                                                "(an FTS5 sync trigger, or an unknown one)")
            return [] if table is None else [f"DROP FUNCTION IF EXISTS {name}_fn() CASCADE"]
        return [statement]

    def insert(self, statement: str, helpers: set[str]) -> list[str]:
        command = self.fts_command(statement)
        return command if command is not None else [self.expr(statement, statement, helpers)]

    def statement(self, statement: str, later: list[str], helpers: set[str]) -> list[str]:
        """One SQLite statement as PostgreSQL statements (none when it has no PostgreSQL effect)."""
        head = _words(statement[:60]).upper()
        if re.match(r"CREATE (TEMP\w* )?TABLE\b", head):
            return [self.create_table(statement, helpers)]
        if head.startswith("CREATE VIRTUAL TABLE"):
            return self.virtual_table(statement, later)
        if re.match(r"CREATE (UNIQUE )?INDEX\b", head) or head.startswith("CREATE VIEW"):
            return [self.expr(statement, statement, helpers)]
        if head.startswith("CREATE TRIGGER"):
            return self.trigger(statement, helpers)
        if head.startswith("DROP "):
            return self.drop(statement)
        if head.startswith("ALTER TABLE"):
            add = re.match(rf"(ALTER\s+TABLE\s+{_IDENT}\s+ADD\s+(?:COLUMN\s+)?)(?!CONSTRAINT\b)(.*)$", statement,
                           re.IGNORECASE | re.DOTALL)
            if add:
                return [add.group(1) + self.column(add.group(2), statement, helpers)]
            if re.match(r"ALTER TABLE \S+ (RENAME|DROP COLUMN)\b", head):
                return [statement]
            raise Untranslatable(statement, "ALTER TABLE form")
        if head.startswith("INSERT"):
            return self.insert(statement, helpers)
        if head.startswith(("UPDATE ", "DELETE ")):
            return [self.expr(statement, statement, helpers)]
        raise Untranslatable(statement, "no translation is declared for this kind of statement")

    def script(self, sql: str) -> str:
        """One SQLite step (schema.sql or a migration) as a PostgreSQL script."""
        statements = split_statements(sql)
        helpers: set[str] = set()
        out: list[str] = []
        for i, statement in enumerate(statements):
            out.extend(self.statement(statement, statements[i + 1:], helpers))
        made = [_HELPERS[h] for h in sorted(helpers - self._helpers_made)]
        self._helpers_made |= helpers
        return "".join(f"{s};\n\n" for s in [*made, *out])


def _pg_files(folder: str) -> Any:
    return resources.files("vantage_peers.db").joinpath("pg", folder)


def prelude() -> str:
    return resources.files("vantage_peers.db").joinpath("pg", "prelude.sql").read_text(encoding="utf-8")


def additions() -> dict[int, tuple[str, str]]:
    """version -> (file name, SQL) of pg/additions/NNN_*.sql: PostgreSQL-only DDL run after step NNN."""
    found: dict[int, tuple[str, str]] = {}
    for entry in _pg_files("additions").iterdir():
        m = re.match(r"^(\d{3})_[a-z0-9_]+\.sql$", entry.name)
        if m:
            if int(m.group(1)) in found:
                raise RuntimeError(f"two PostgreSQL additions for version {int(m.group(1))}")
            found[int(m.group(1))] = (entry.name, entry.read_text(encoding="utf-8"))
    return found


def postgres_steps(sqlite_steps: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
    """(version, name, PostgreSQL SQL) for SQLite's steps (version 1 = schema.sql first): the prelude
    before step 1, each step translated, then that version's addition."""
    extra = additions()
    versions = {v for v, _, _ in sqlite_steps}
    if set(extra) - versions:
        raise RuntimeError(f"pg/additions for versions with no SQLite step: {sorted(set(extra) - versions)}")
    translator = Translator()
    out = []
    for version, name, sql in sqlite_steps:
        text = translator.script(sql)
        if version == 1:
            text = prelude() + "\n" + text
        if version in extra:
            text += f"-- pg/additions/{extra[version][0]}\n{extra[version][1]}"
        out.append((version, name, text))
    return out
