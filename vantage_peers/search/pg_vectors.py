"""Vectors on PostgreSQL: a pgvector table per embedded table, with an HNSW index on cosine distance.

The counterpart of the vec0 tables (search/sqlite_vectors.py; search/backend.py picks this module for a
PostgreSQL database): `<name>(seq BIGINT PRIMARY KEY, <metadata columns>, embedding vector(n))`, created on
the first embedding like vec0's, with the VecTable's `pg_triggers` (plpgsql functions named like
the triggers they back, so dropping a function drops its trigger). Large scopes are searched like
SQLite's, by search/ann.py's sign codes and int8 copies (a `<name>_bits` table beside the vectors, a
per-process cache) with the exact distance of the best candidates (`rescore`: one `seq = ANY(…)`
query); tables created before that have no bits table and keep the HNSW path until `vantage-peers
reindex`. The exact KNN (`nearest`: small scopes, and a shortfall of the approximate path) uses
HNSW: the graph is built wider than pgvector's default (db/pgschema_virtual.py's
HNSW_WITH), a KNN query sets `hnsw.ef_search` to EF_SEARCH or k if larger (the width that keeps
recall@10 against an exact scan at 0.95 or more) and `hnsw.iterative_scan = strict_order` (filters
inside the KNN still yield k rows, nearest first). pgvector indexes at most HNSW_MAX_DIMS dimensions;
a larger model is searched exactly (a scan).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..db import Connection
from ..db.pgschema_virtual import HNSW_MAX_DIMS, HNSW_WITH
from . import ann

# Measured on 100k synthetic 384-d vectors (benchmarks/pg_hnsw.py), m 32 / ef_construction 200, k 100:
# recall@10 against exact 0.87 / 0.895 / 0.94 / 0.945 / 0.96 / 0.97 at ef_search 100 / 200 / 400 / 500 / 600 /
# 800 (pgvector's default graph: 0.77 / 0.81 / 0.86 at 100 / 200 / 400).
EF_SEARCH = 600
EF_SEARCH_MAX = 1000  # pgvector's bound; a larger k is answered by an exact scan
_LOCK = 0x5650_5645  # "VPVE": one process creates a vector table at a time


def literal(vector: Sequence[float]) -> str:
    """pgvector's text form of a float32 vector. Rounded to float32 first (as pgvector stores it), then
    written with 9 significant digits, which read back (strtof) as exactly that float32; `repr` of
    each value took ≈300 µs for 384 dimensions and wrote 17 digits, this ≈60 µs and 9."""
    values = np.asarray(vector, dtype=np.float32).ravel().tolist()
    return "[" + ",".join(["%.9g"] * len(values)) % tuple(values) + "]"


def table_exists(conn: Connection, name: str) -> bool:
    """Does table `name` exist? In a read transaction the answer is remembered for the rest of it, and a
    vector table and its sign-code table (search/ann.py) are looked up together, with the sign codes'
    generation and epoch in `meta` that the KNN reads next (`ann.META_KEYS`, left on the connection for
    `ann`): one round trip instead of three (a read creates and drops no table, and sees one `meta`)."""
    if getattr(conn, "in_tx", None) != "read":
        return bool(conn.scalar("SELECT to_regclass(?) IS NOT NULL", [name]))
    known: dict[str, bool] | None = getattr(conn, "_vp_tables", None)
    if known is None:
        known = {}
        conn._vp_tables = known  # type: ignore[attr-defined]  # the connection object lives for one transaction
    if name not in known:
        other = name[:-len(ann.BITS_SUFFIX)] if name.endswith(ann.BITS_SUFFIX) else ann.bits_table(name)
        meta: dict[str, str] = {}
        for found, exists_, value in conn.rows(
                "SELECT n, to_regclass(n) IS NOT NULL, NULL FROM unnest(?::text[]) AS n "
                "UNION ALL SELECT key, NULL, value FROM meta WHERE key = ANY(?::text[])",
                [[name, other], list(ann.META_KEYS)]):
            if exists_ is None:
                meta[str(found)] = str(value)
            else:
                known[str(found)] = bool(exists_)
        conn._vp_ann_meta = meta  # type: ignore[attr-defined]
    return known[name]


def has_column(conn: Connection, table: str, column: str) -> bool:
    return bool(conn.scalar("SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
                            "AND table_name = ? AND column_name = ?", [table, column.lower()]))


def exists(conn: Connection, table: Any) -> bool:
    return table_exists(conn, table.name)


def columns_ddl(sqlite_ddl: str) -> str:
    """vec0 column declarations in PostgreSQL types (no PARTITION KEY; INTEGER is BIGINT)."""
    ddl = re.sub(r"\s+PARTITION\s+KEY\b", "", sqlite_ddl, flags=re.IGNORECASE)
    return re.sub(r"\bINTEGER\b", "BIGINT", ddl, flags=re.IGNORECASE)


def create(conn: Connection, table: Any, dimensions: int) -> None:
    conn.execute(f"SELECT pg_advisory_xact_lock({_LOCK})")
    if table_exists(conn, table.name):
        return
    conn.execute(f"CREATE TABLE {table.name} (seq BIGINT PRIMARY KEY, {columns_ddl(table.columns_ddl)}, "
                 f"embedding vector({int(dimensions)}) NOT NULL)")
    if dimensions <= HNSW_MAX_DIMS:
        conn.execute(f"CREATE INDEX {table.name}_hnsw ON {table.name} USING hnsw (embedding vector_cosine_ops) "
                     f"{HNSW_WITH}")
    for ddl in table.pg_triggers.values():
        conn.script(ddl)
    if table.ann:
        ann.create(conn, table.name)  # sign codes and int8 copies for large scopes (search/ann.py)


def drop(conn: Connection, table: Any) -> None:
    for name in table.pg_triggers:
        conn.execute(f"DROP FUNCTION IF EXISTS {name}() CASCADE")
    conn.execute(f"DROP TABLE IF EXISTS {table.name}")
    ann.drop(conn, table.name)


def replace(conn: Connection, table: Any, rows: Sequence[tuple[int, Sequence[object], Sequence[float]]]) -> None:
    names = ", ".join(table.columns)
    marks = ", ".join("?" for _ in table.columns)
    updates = ", ".join(f"{c} = excluded.{c}" for c in [*table.columns, "embedding"])
    conn.executemany(
        f"INSERT INTO {table.name} (seq, {names}, embedding) VALUES (?, {marks}, ?::vector) "
        f"ON CONFLICT (seq) DO UPDATE SET {updates}",
        [(seq, *values, literal(vec)) for seq, values, vec in rows],
    )
    if table.ann:  # the first column is the partition key (the scope of an approximate query)
        ann.write(conn, table.name, [(seq, values[0], vec) for seq, values, vec in rows])


def _settings(conn: Connection, k: int, filtered: bool) -> None:
    if k > EF_SEARCH_MAX:
        conn.execute("SET LOCAL enable_indexscan = off")  # exact: HNSW cannot return more than ef_search rows
        return
    conn.execute(f"SET LOCAL hnsw.ef_search = {max(EF_SEARCH, int(k))}")
    if filtered:
        conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")


def nearest(conn: Connection, table: Any, vector: Sequence[float], *, k: int, clauses: Sequence[str],
            params: Sequence[object]) -> list[tuple[object, object]]:
    """(seq, cosine distance) rows, nearest first; the settings live in a savepoint rolled back after."""
    where = f"WHERE {' AND '.join(f'({c})' for c in clauses)}" if clauses else ""
    text = literal(vector)
    in_tx = bool(getattr(conn, "in_tx", None))
    if in_tx:
        conn.execute("SAVEPOINT vp_knn")
    try:
        if in_tx:
            _settings(conn, k, bool(clauses))
        rows = conn.rows(
            f"SELECT seq, embedding <=> ?::vector AS distance FROM {table.name} {where} "
            f"ORDER BY embedding <=> ?::vector LIMIT ?", [text, *params, text, int(k)])
    finally:
        if in_tx:
            conn.execute("ROLLBACK TO SAVEPOINT vp_knn")  # the SET LOCALs end here
            conn.execute("RELEASE SAVEPOINT vp_knn")
    return rows


def rescore(conn: Connection, table: Any, vector: Sequence[float], seqs: Sequence[int], *,
            clauses: Sequence[str], params: Sequence[object]) -> list[tuple[object, object]]:
    where = " AND ".join(["seq = ANY(?::bigint[])", *clauses])
    return conn.rows(f"SELECT seq, embedding <=> ?::vector FROM {table.name} WHERE {where}",
                     [literal(vector), list(seqs), *params])
