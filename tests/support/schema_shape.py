"""The shape of a migrated schema, introspected the same way on SQLite and PostgreSQL (issue #33):
tables, columns (name, nullability, type class), primary keys, unique and foreign-key constraints,
CHECK counts, indexes (name, columns, uniqueness, partial or not) and full-text indexes.

Names are lower case (PostgreSQL folds unquoted names). What differs on purpose between the backends
is declared here once: type classes (`INTEGER`/`BIGINT` are "integer", `REAL`/`NUMERIC`/`DOUBLE
PRECISION` "real", a `COLLATE NOCASE` TEXT and a CITEXT "text_ci"), FTS5 virtual tables against
`<table>_fts` tsvector side tables (both reduced to {name: [columns]}), and the tables each backend
keeps for itself (SQLite's FTS5 shadow tables, PostgreSQL's `vp_schema`).

`exact=True` (PostgreSQL only) keeps PostgreSQL's own type names and adds triggers and functions:
the snapshot of the old hand-written schema is compared in that detail.
"""

from __future__ import annotations

import re
from typing import Any

Shape = dict[str, Any]
_FTS_SHADOWS = ("_data", "_idx", "_docsize", "_config", "_content")


def _sqlite_type(declared: str, collation_nocase: bool) -> str:
    t = declared.upper()
    if "INT" in t:
        return "integer"
    if any(k in t for k in ("REAL", "FLOA", "DOUB", "NUMERIC", "DECIMAL")):
        return "real"
    if "BLOB" in t:
        return "blob"
    return "text_ci" if collation_nocase else "text"


def _pg_type(name: str) -> str:
    if name in ("bigint", "integer", "smallint"):
        return "integer"
    if name in ("double precision", "real", "numeric"):
        return "real"
    if name == "bytea":
        return "blob"
    return "text_ci" if name == "citext" else "text"


def _index_entry(table: str, columns: list[str], unique: bool, partial: bool) -> dict[str, Any]:
    return {"table": table, "columns": columns, "unique": unique, "partial": partial}


def sqlite_shape(conn: Any) -> Shape:
    """`conn`: a SQLite `Connection` (its `rows`)."""
    masters = conn.rows("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")
    fts = {name for kind, name, _, sql in masters if kind == "table" and sql and "USING fts5" in sql}
    shadows = {f + s for f in fts for s in _FTS_SHADOWS}
    tables: dict[str, Any] = {}
    indexes: dict[str, Any] = {}
    full_text: dict[str, Any] = {}
    for kind, name, _, sql in masters:
        if kind != "table" or name in shadows or name.startswith("vec") or "_vec" in name:
            continue
        columns = [r[1] for r in conn.rows("SELECT * FROM pragma_table_info(?)", (name,))]
        if name in fts:
            full_text[name.lower()] = {"columns": [c.lower() for c in columns],
                                       "kind": "trigram" if "trigram" in sql else "words"}
            continue
        tables[name.lower()] = _sqlite_table(conn, name, sql)
        for idx in conn.rows("SELECT name, \"unique\", origin, partial FROM pragma_index_list(?)", (name,)):
            if idx[2] != "c":
                continue
            cols = [("<expr>" if r[2] is None else r[2].lower()) + (" desc" if r[3] else "")
                    for r in conn.rows("SELECT seqno, cid, name, \"desc\", key FROM pragma_index_xinfo(?)",
                                       (idx[0],)) if r[4]]
            indexes[idx[0].lower()] = _index_entry(name.lower(), cols, bool(idx[1]), bool(idx[3]))
    return {"tables": tables, "indexes": indexes, "fts": full_text}


def _sqlite_table(conn: Any, name: str, sql: str) -> dict[str, Any]:
    info = conn.rows("SELECT cid, name, type, \"notnull\", dflt_value, pk, hidden FROM pragma_table_xinfo(?)",
                     (name,))
    nocase = {m.group(1).lower() for m in re.finditer(r"(\w+)\s+TEXT[^,]*COLLATE\s+NOCASE", sql, re.IGNORECASE)}
    pk = [r[1].lower() for r in sorted((r for r in info if r[5]), key=lambda r: r[5])]
    # A primary-key column is NOT NULL on PostgreSQL; SQLite lets a rowid table's non-integer one hold NULL.
    columns = [[r[1].lower(), not r[3] and not r[5],
                _sqlite_type(r[2], r[1].lower() in nocase)] for r in info]
    unique = sorted(
        [r[2].lower() for r in conn.rows("SELECT * FROM pragma_index_info(?)", (idx[0],))]
        for idx in conn.rows("SELECT name, \"unique\", origin FROM pragma_index_list(?)", (name,)) if idx[2] == "u")
    fks: dict[int, Any] = {}
    for r in conn.rows("SELECT id, seq, \"table\", \"from\", \"to\", on_delete FROM pragma_foreign_key_list(?)",
                       (name,)):
        entry = fks.setdefault(r[0], {"columns": [], "references": r[2].lower(), "to": [],
                                      "on_delete": r[5].lower()})
        entry["columns"].append(r[3].lower())
        entry["to"].append(r[4].lower())
    checks = len(re.findall(r"\bCHECK\s*\(", sql, re.IGNORECASE))
    return {"columns": columns, "primary_key": pk, "unique": unique,
            "foreign_keys": sorted(fks.values(), key=repr), "checks": checks}


_PG_COLUMNS = """
SELECT c.relname, a.attname, NOT a.attnotnull, format_type(a.atttypid, a.atttypmod),
       concat_ws(' ', a.attidentity, a.attgenerated, pg_get_expr(d.adbin, d.adrelid))
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = current_schema() AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY c.relname, a.attnum"""

_PG_CONSTRAINTS = """
SELECT c.relname, k.contype, pg_get_constraintdef(k.oid),
       (SELECT array_agg(a.attname ORDER BY u.o) FROM unnest(k.conkey) WITH ORDINALITY u(n, o)
        JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.n),
       f.relname,
       (SELECT array_agg(a.attname ORDER BY u.o) FROM unnest(k.confkey) WITH ORDINALITY u(n, o)
        JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = u.n),
       k.confdeltype
FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_class f ON f.oid = k.confrelid
WHERE n.nspname = current_schema()"""

_PG_INDEXES = """
SELECT i.relname, t.relname, x.indisunique, x.indpred IS NOT NULL,
       (SELECT array_agg(CASE WHEN u.n = 0 THEN '<expr>' ELSE a.attname END
                         || CASE WHEN x.indoption[u.o - 1] & 1 = 1 THEN ' desc' ELSE '' END ORDER BY u.o)
        FROM unnest(x.indkey::int2[]) WITH ORDINALITY u(n, o)
        LEFT JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = u.n
        WHERE u.o <= x.indnkeyatts),
       EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = x.indexrelid AND k.conrelid = x.indrelid),
       pg_get_indexdef(x.indexrelid)
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace WHERE n.nspname = current_schema()"""

_PG_COMMENTS = """
SELECT c.relname, c.relkind, obj_description(c.oid, 'pg_class')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'v') AND obj_description(c.oid, 'pg_class') IS NOT NULL"""

_PG_TRIGGERS = """
SELECT t.tgname, c.relname, pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND NOT t.tgisinternal"""

_PG_ROUTINES = """
SELECT p.proname, p.prokind, pg_get_function_identity_arguments(p.oid) FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = current_schema()"""

_DELETE_ACTIONS = {"a": "no action", "r": "restrict", "c": "cascade", "n": "set null", "d": "set default"}


def pg_shape(conn: Any, *, exact: bool = False) -> Shape:
    """`conn`: a `PgConnection` (its `rows`)."""
    fts = {name: (kind, comment) for name, kind, comment in conn.rows(_PG_COMMENTS) if name.endswith("_fts")}
    # A side table's comment lists its columns in label order; the trigram view's starts with `trigram`.
    full_text = {name: {"columns": [c.lower() for c in comment.split() if c != "trigram"],
                        "kind": "trigram" if comment.startswith("trigram") else "words"}
                 for name, (_kind, comment) in fts.items()}
    skip = set(fts) | {"vp_schema"}
    tables: dict[str, Any] = {}
    for table, column, nullable, type_name, default in conn.rows(_PG_COLUMNS):
        if table in skip or table.endswith("_vec") or table.startswith("vec"):
            continue
        entry = tables.setdefault(table, {"columns": [], "primary_key": [], "unique": [], "foreign_keys": [],
                                          "checks": 0})
        entry["columns"].append([column, bool(nullable), type_name if exact else _pg_type(type_name)])
        if exact:  # identity, generated expression and default
            entry["columns"][-1].append(default.strip())
    for table, kind, definition, cols, ref, ref_cols, on_delete in conn.rows(_PG_CONSTRAINTS):
        entry = tables.get(table)
        if entry is None:
            continue
        if kind == "p":
            entry["primary_key"] = list(cols)
        elif kind == "u":
            entry["unique"].append(list(cols))
        elif kind == "f":
            entry["foreign_keys"].append({"columns": list(cols), "references": ref, "to": list(ref_cols),
                                          "on_delete": _DELETE_ACTIONS[on_delete]})
        elif kind == "c":
            entry["checks"] += 1
            if exact:
                entry.setdefault("check_definitions", []).append(definition)
    for entry in tables.values():
        entry["unique"].sort()
        entry.get("check_definitions", []).sort()
        entry["foreign_keys"].sort(key=repr)
    indexes: dict[str, Any] = {}
    for name, table, unique, partial, cols, of_constraint, definition in conn.rows(_PG_INDEXES):
        if of_constraint or table not in tables:
            continue
        indexes[name] = _index_entry(table, list(cols), bool(unique), bool(partial))
        if exact:
            indexes[name]["definition"] = definition
    shape: Shape = {"tables": tables, "indexes": indexes, "fts": full_text}
    if exact:
        shape["triggers"] = {name: {"table": table, "definition": d} for name, table, d in conn.rows(_PG_TRIGGERS)}
        shape["routines"] = sorted(f"{kind} {name}({args})" for name, kind, args in conn.rows(_PG_ROUTINES))
    return shape


def shape_of(db: Any, *, exact: bool = False) -> Shape:
    """The shape of a migrated `Database` or `PgDatabase`."""
    if getattr(db, "backend", "sqlite") == "postgres":
        return db.read(lambda c: pg_shape(c, exact=exact))
    return db.read(sqlite_shape)
