"""The memory vectors: the `memories_vec` vec0 table (pgvector on PostgreSQL), its triggers, and the memory KNN.

- `namespace` is the vec0 *partition key*: a namespaced KNN scans only that namespace's chunks,
  and a `prefix/*` query is a range over partition keys.
- `type`, `isLatest` and `expiresAt` are metadata columns filtered inside the KNN, so archived,
  soft-deleted and expired memories never take a slot among the k nearest.
- Triggers created with the table keep the metadata in step with `memories` (supersede, soft
  delete, hard delete, content change), whoever changes the row.

The generic vec0 machinery (create, replace, nearest, rescore, model bookkeeping) is `search/vectors.py`;
this module re-exports what memory callers use so they import one name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.scopes import byte_range
from ...db import Connection
from ...search import ann
from ...search import vectors as _vec
from ...search.vectors import (  # noqa: F401 - re-exported for memory callers
    CHUNK_SIZE,
    NO_EXPIRY,
    ModelMismatch,
    QueryVector,
    Recorded,
    Scope,
    VecTable,
    mismatch,
    nearest,
    recorded,
    rescore,
    source_of,
    staged,
    switch_target,
    table_mismatch,
    table_model,
    unusable,
)
from .store import rows_by_seq

TABLE = "memories_vec"
_STALE, _PG_STALE = _vec.stale_triggers("memories", TABLE, "content, namespace")

_TRIGGERS = {
    "memories_vec_state": f"""
        CREATE TRIGGER memories_vec_state AFTER UPDATE OF isLatest, expiresAt, type ON memories BEGIN
            UPDATE {TABLE} SET isLatest = new.isLatest, expiresAt = coalesce(new.expiresAt, {NO_EXPIRY}),
                type = new.type WHERE rowid = new.seq;
        END""",
    **_STALE,
}

# The same on PostgreSQL (search/pg_vectors.py): plpgsql functions named like their triggers.
_PG_TRIGGERS = {
    "memories_vec_state": f"""
        CREATE FUNCTION memories_vec_state() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
            UPDATE {TABLE} SET isLatest = NEW.isLatest, expiresAt = coalesce(NEW.expiresAt, {NO_EXPIRY}),
                type = NEW.type WHERE seq = NEW.seq;
            RETURN NULL;
        END $$;
        CREATE TRIGGER memories_vec_state AFTER UPDATE OF isLatest, expiresAt, type ON memories
            FOR EACH ROW EXECUTE FUNCTION memories_vec_state();""",
    **_PG_STALE,
}

MEMORIES = VecTable(
    name=TABLE, label="memory",
    columns_ddl="namespace TEXT PARTITION KEY, type TEXT, isLatest INTEGER, expiresAt INTEGER",
    columns=("namespace", "type", "isLatest", "expiresAt"), triggers=_TRIGGERS, pg_triggers=_PG_TRIGGERS,
    ann=True,
)


def table_exists(conn: Connection, table: VecTable = MEMORIES) -> bool:
    return _vec.table_exists(conn, table)


def ensure(conn: Connection, model: str, dimensions: int, table: VecTable = MEMORIES) -> VecTable:
    return _vec.ensure(conn, model, dimensions, table)


def drop(conn: Connection, tables: Sequence[VecTable] = (MEMORIES,)) -> None:
    _vec.drop(conn, tables)


def count(conn: Connection, table: VecTable = MEMORIES) -> int:
    return _vec.count(conn, table)


def upsert(conn: Connection, rows: Sequence[tuple[int, str, str, int, int | None, Sequence[float]]]) -> None:
    """Memory vectors: (seq, namespace, type, isLatest, expiresAt, vector) rows."""
    _vec.replace(conn, MEMORIES, [(seq, (ns, typ, int(latest), NO_EXPIRY if exp is None else exp), vec)
                                  for seq, ns, typ, latest, exp, vec in rows])


def knn(
    conn: Connection,
    vector: Sequence[float],
    *,
    k: int,
    scope: Scope | None,
    types: Sequence[str] | None,
    include_superseded: bool,
    now: int,
    approximate: bool = True,
) -> list[tuple[int, float]]:
    """The k nearest live memories as (seq, cosine distance), nearest first; for large scopes by
    sign-bit candidates rescored exactly (search/ann.py), `approximate=False` forces exact KNN."""
    clauses = ["expiresAt > ?"]
    params: list[object] = [now]
    if scope is not None and scope.kind == "exact":
        clauses.append("namespace = ?")
        params.append(scope.value)
    elif scope is not None and scope.kind == "prefix":
        low, high = scope.bounds()
        clauses.append(byte_range("namespace"))  # byte order on pgvector's table too
        params.extend([low, high])
    if not include_superseded:
        clauses.append("isLatest = 1")
    if types:
        clauses.append(f"type IN ({','.join('?' for _ in types)})")
        params.extend(types)
    if approximate:
        # With a type filter: FILTER_OVERSAMPLE × more candidates, kept (in their order) when the
        # memories table says they are live, latest and of the type — indexed lookups, far cheaper
        # than vec0's — and only the first `rescore` of those get the exact distance. Without one,
        # the rescoring's own filters (latest, unexpired) drop few: the pool is rescored in batches
        # of `rescore`, best first, until k are found; the exact KNN covers a shortfall.
        factor = ann.FILTER_OVERSAMPLE if types else 1
        seqs = ann.candidates(conn, MEMORIES.name, vector, k=k, scope=scope, factor=factor)
        if seqs is not None:
            batch = seqs.rescore
            if types:
                seqs = _live_first(conn, seqs, types=types, include_superseded=include_superseded, now=now,
                                   need=batch)[:batch]
            hits: list[tuple[int, float]] = []
            for start in range(0, len(seqs), batch):
                hits.extend(rescore(conn, MEMORIES, vector, seqs[start:start + batch], k=k, clauses=clauses,
                                    params=params))
                if len(hits) >= k:
                    return sorted(hits, key=lambda hit: (hit[1], hit[0]))[:k]
    return nearest(conn, MEMORIES, vector, k=k, clauses=clauses, params=params)


def _live_first(conn: Connection, seqs: Sequence[int], *, types: Sequence[str] | None, include_superseded: bool,
                now: int, need: int) -> list[int]:
    """`seqs` (kept in order) whose memory is unexpired, latest unless `include_superseded`, of `types`;
    looked up a slice at a time, stopping once `need` are kept (each lookup is a random row read)."""
    where = ["(m.expiresAt IS NULL OR m.expiresAt > ?)"]
    params: list[Any] = [now]
    if not include_superseded:
        where.append("m.isLatest = 1")
    if types:
        where.append(f"m.type IN ({','.join('?' for _ in types)})")
        params.extend(types)
    kept: list[int] = []
    step = max(need, 100)
    for start in range(0, len(seqs), step):
        part = list(seqs[start:start + step])
        keep = {int(r["seq"]) for r in rows_by_seq(conn, part, where, params, columns="m.seq")}
        kept.extend(seq for seq in part if seq in keep)
        if len(kept) >= need:
            break
    return kept
