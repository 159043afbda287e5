"""Switching the embedding model without losing vector search meanwhile (#35).

`vantage-peers reindex` with a model other than the index's does not drop the old vectors: it marks
the switch (`meta` `embedding.switch` = the new model) and queues every row. The worker then writes
the new model's vectors to each index's staged table (`vectors.staged`: `memories_vec_next`, its own
`vectorModels` record), never to the index, while queries keep comparing a query embedded by the
*old* model with the old index (domains/memory/services.py) — no query meets two models' vectors.
When no row is left to embed, `promote` swaps in one transaction: the old index is dropped, the
staged table becomes the index (renamed on PostgreSQL; copied into a new vec0 table on SQLite,
whose virtual tables cannot be renamed, with its sign codes), the records say the new model.
A killed reindex leaves all of this in place: the next run resumes on the staged tables.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

from ..db import Connection
from . import backend, vectors
from .corpus import Corpus

COPY_BATCH = 512  # rows moved per round on SQLite (bounded memory)


@dataclass(frozen=True)
class Progress:
    old: str | None  # the index's model (None: no vectors on file)
    new: str
    embedded: int  # rows with a vector in the staged tables
    total: int  # rows to embed


def begin(conn: Connection, tables: Sequence[vectors.VecTable], model: str) -> None:
    """Start a switch to `model`: forget any staged vectors of an earlier, abandoned switch."""
    for table in tables:
        _drop(conn, vectors.staged(table))
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                 (vectors.META_SWITCH, model))


def needed(conn: Connection, tables: Sequence[vectors.VecTable], model: str) -> bool:
    """Whether rebuilding for `model` is a switch: some index holds another model's vectors."""
    return any(rec is not None and rec.model != model and vectors.count(conn, t) > 0
               for t, rec in ((t, vectors.table_model(conn, t)) for t in tables))


def progress(conn: Connection, corpora: Sequence[Corpus]) -> Progress | None:
    """How far the switch under way has got (None when there is none)."""
    new = vectors.switch_target(conn)
    if new is None:
        return None
    old = next((rec.model for rec in (vectors.table_model(conn, c.vec) for c in corpora) if rec is not None), None)
    embedded = sum(vectors.count(conn, vectors.staged(c.vec)) for c in corpora)
    total = sum(int(conn.scalar(f"SELECT count(*) FROM {c.source}")) for c in corpora)
    return Progress(old=old, new=new, embedded=embedded, total=total)


def finish(conn: Connection, corpora: Sequence[Corpus], model: str) -> bool:
    """Promote the staged tables when the switch to `model` has nothing left to embed; True if it did."""
    if vectors.switch_target(conn) != model:
        return False
    if any(conn.scalar(f"SELECT 1 FROM {c.jobs} LIMIT 1") is not None for c in corpora):
        return False
    promote(conn, [c.vec for c in corpora], model)
    return True


def promote(conn: Connection, tables: Sequence[vectors.VecTable], model: str) -> None:
    """The staged tables become the indexes, the old vectors go (call inside one transaction)."""
    dims = None
    for table in tables:
        staged = vectors.staged(table)
        rec = vectors.table_model(conn, staged)
        _drop(conn, table)
        if rec is None or not vectors.table_exists(conn, staged):
            _drop(conn, staged)  # nothing of this corpus was embedded: its index starts empty
            continue
        dims = rec.dimensions
        if backend.of(conn).name == "postgres":
            _rename_pg(conn, staged, table)
        else:
            _copy_sqlite(conn, staged, table, rec.dimensions)
        _drop(conn, staged)
        vectors.record(conn, table, rec.model, rec.dimensions)
    conn.execute("DELETE FROM meta WHERE key IN (?, ?, ?)", (vectors.META_SWITCH, vectors.META_MODEL, vectors.META_DIMS))
    if dims is not None:
        vectors.record_file(conn, model, dims)


def _drop(conn: Connection, table: vectors.VecTable) -> None:
    backend.of(conn).vectors.drop(conn, table)
    conn.execute("DELETE FROM vectorModels WHERE name = ?", (table.name,))


def _rename_pg(conn: Connection, staged: vectors.VecTable, table: vectors.VecTable) -> None:
    """O(1): the pgvector table and its HNSW index change name; the staged triggers (their plpgsql
    bodies name the staged table) are replaced by the index's own."""
    for name in staged.pg_triggers:
        conn.execute(f"DROP FUNCTION IF EXISTS {name}() CASCADE")
    conn.execute(f"ALTER TABLE {staged.name} RENAME TO {table.name}")
    conn.execute(f"ALTER INDEX IF EXISTS {staged.name}_hnsw RENAME TO {table.name}_hnsw")
    for ddl in table.pg_triggers.values():
        conn.script(ddl)


def _copy_sqlite(conn: Connection, staged: vectors.VecTable, table: vectors.VecTable, dims: int) -> None:
    """vec0 has no rename: a new index of `dims`, filled from the staged one in bounded rounds
    (`vectors.replace` writes the sign codes too)."""
    backend.of(conn).vectors.create(conn, table, dims)
    names = ", ".join(staged.columns)
    rows = iter(conn.raw.cursor().execute(f"SELECT rowid, {names}, embedding FROM {staged.name}"))
    while chunk := list(islice(rows, COPY_BATCH)):  # one scan of the staged table, 512 rows in memory
        vectors.replace(conn, table, [(int(r[0]), tuple(r[1:-1]), array("f", bytes(r[-1]))) for r in chunk])
