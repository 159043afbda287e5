"""Vectors on SQLite: a sqlite-vec `vec0` table per embedded table (search/vectors.py's SQLite side,
chosen by search/backend.py), with the sign codes of search/ann.py beside it when the VecTable asks.
Same functions as search/pg_vectors.py; `nearest` and `rescore` return raw (seq, distance) rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..db import Connection
from . import ann
from .vectors import CHUNK_SIZE, pack


def table_exists(conn: Connection, name: str) -> bool:
    return conn.scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)) is not None


def has_column(conn: Connection, table: str, column: str) -> bool:
    return any(row[1] == column for row in conn.rows(f"PRAGMA table_info({table})"))


def exists(conn: Connection, table: Any) -> bool:
    return table_exists(conn, table.name)


def create(conn: Connection, table: Any, dimensions: int) -> None:
    conn.execute(
        f"CREATE VIRTUAL TABLE {table.name} USING vec0 ({table.columns_ddl}, "
        f"embedding float[{int(dimensions)}] distance_metric=cosine, chunk_size={CHUNK_SIZE})"
    )
    for sql in table.triggers.values():
        conn.execute(sql)
    if table.ann:
        ann.create(conn, table.name)  # sign codes for the approximate first pass (search/ann.py)


def drop(conn: Connection, table: Any) -> None:
    for name in table.triggers:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    if exists(conn, table):
        conn.execute(f"DROP TABLE {table.name}")
    ann.drop(conn, table.name)


def replace(conn: Connection, table: Any, rows: Sequence[tuple[int, Sequence[object], Sequence[float]]]) -> None:
    names = ", ".join(table.columns)
    marks = ", ".join("?" for _ in table.columns)
    conn.executemany(f"DELETE FROM {table.name} WHERE rowid = ?", [(r[0],) for r in rows])
    conn.executemany(
        f"INSERT INTO {table.name} (rowid, {names}, embedding) VALUES (?, {marks}, ?)",
        [(seq, *values, pack(vec)) for seq, values, vec in rows],
    )
    if table.ann:  # the first column is the partition key (the scope of an approximate query)
        ann.write(conn, table.name, [(seq, values[0], vec) for seq, values, vec in rows])


def nearest(conn: Connection, table: Any, vector: Sequence[float], *, k: int, clauses: Sequence[str],
            params: Sequence[object]) -> list[tuple[object, object]]:
    where = ["embedding MATCH ?", "k = ?", *clauses]
    return conn.raw.execute(
        f"SELECT rowid, distance FROM {table.name} WHERE {' AND '.join(where)} ORDER BY distance",
        [pack(vector), k, *params],
    ).fetchall()


def rescore(conn: Connection, table: Any, vector: Sequence[float], seqs: Sequence[int], *,
            clauses: Sequence[str], params: Sequence[object]) -> list[tuple[object, object]]:
    """One point lookup per row: vec0 answers `rowid = ?` from its rowid index, while `rowid IN (…)`
    scans the table."""
    where = " AND ".join(["rowid = ?", *clauses])
    sql = f"SELECT rowid, vec_distance_cosine(embedding, ?) FROM {table.name} WHERE {where}"
    blob = pack(vector)
    cur = conn.raw.cursor()
    out: list[tuple[object, object]] = []
    for seq in seqs:
        out.extend(cur.execute(sql, [blob, seq, *params]))
    return out
