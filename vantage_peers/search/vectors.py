"""Vectors in sqlite-vec `vec0` tables, one per embedded table, keyed by the source row's `seq`.

`VecTable` describes one such table (its columns and the triggers that keep it in step with its
source rows); the model and dimension recorded in `meta` hold for every table of the file. The
module-level functions default to `MEMORIES`, the memory vectors:

- `namespace` is the vec0 *partition key*: a namespaced KNN scans only that namespace's chunks,
  and a `prefix/*` query is a range over partition keys.
- `type`, `isLatest` and `expiresAt` are metadata columns filtered inside the KNN, so archived,
  soft-deleted and expired memories never take a slot among the k nearest.
- The table is created on the first successful embedding, when the dimension is known; the model
  and dimension are recorded in `meta`. A later, different model or dimension is a mismatch:
  nothing is written with it until `vantage-peers reindex` drops the table and re-embeds.
- Triggers created with the table keep the metadata in step with `memories` (supersede, soft
  delete, hard delete, content change), whoever changes the row.
- `chunk_size` is small because vec0 allocates a whole chunk per partition: the default (1024
  vectors × 6 KB at 1536 dims) would cost 6 MB for every namespace holding even one memory.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..db import Connection
from . import ann

TABLE = "memories_vec"
CHUNK_SIZE = 64
META_MODEL = "embedding.model"
META_DIMS = "embedding.dimensions"
NO_EXPIRY = 1 << 62  # metadata columns cannot be NULL-compared inside a KNN; "never" is far future
MAX_K = 4096  # vec0's own limit on k

_TRIGGERS = {
    "memories_vec_state": f"""
        CREATE TRIGGER memories_vec_state AFTER UPDATE OF isLatest, expiresAt, type ON memories BEGIN
            UPDATE {TABLE} SET isLatest = new.isLatest, expiresAt = coalesce(new.expiresAt, {NO_EXPIRY}),
                type = new.type WHERE rowid = new.seq;
        END""",
    "memories_vec_stale": f"""
        CREATE TRIGGER memories_vec_stale AFTER UPDATE OF content, namespace ON memories BEGIN
            DELETE FROM {TABLE} WHERE rowid = old.seq;
        END""",
    "memories_vec_delete": f"""
        CREATE TRIGGER memories_vec_delete AFTER DELETE ON memories BEGIN
            DELETE FROM {TABLE} WHERE rowid = old.seq;
        END""",
}


@dataclass(frozen=True)
class VecTable:
    """One vec0 table: non-vector columns (DDL and names, in insert order) and its triggers.

    The triggers live on the source table and are created with the vec0 table (it exists only
    once the dimension is known), and dropped with it.
    """

    name: str
    label: str  # what one row is, for messages: "memory", "fix pattern"
    columns_ddl: str
    columns: tuple[str, ...]
    triggers: Mapping[str, str] = field(default_factory=dict)


MEMORIES = VecTable(
    name=TABLE, label="memory",
    columns_ddl="namespace TEXT PARTITION KEY, type TEXT, isLatest INTEGER, expiresAt INTEGER",
    columns=("namespace", "type", "isLatest", "expiresAt"), triggers=_TRIGGERS,
)


class ModelMismatch(Exception):
    """The vectors on file were made by another model or have another dimension."""


@dataclass(frozen=True)
class Recorded:
    model: str
    dimensions: int


@dataclass(frozen=True)
class Scope:
    """Which namespaces a query covers: one exactly, or every one under a `prefix/`."""

    kind: str  # "exact" | "prefix" | "all"
    value: str
    visible: tuple[str, ...] | None = None  # the caller's readable prefixes (None = all), applied in SQL

    def bounds(self) -> tuple[str, str]:
        """[low, high) over namespace strings for a prefix (binary collation, like vec0)."""
        return self.value, self.value[:-1] + chr(ord(self.value[-1]) + 1)


def pack(vector: Sequence[float]) -> bytes:
    """float32 bytes for vec0; numpy float32 rows (the embedding providers' output) without a copy per float."""
    if getattr(vector, "dtype", None) is not None and str(vector.dtype) == "float32":  # type: ignore[attr-defined]
        return vector.tobytes()  # type: ignore[attr-defined]
    return array("f", vector).tobytes()


def recorded(conn: Connection) -> Recorded | None:
    rows = {r["key"]: r["value"] for r in conn.query(
        "SELECT key, value FROM meta WHERE key IN (?, ?)", (META_MODEL, META_DIMS))}
    if META_MODEL not in rows or META_DIMS not in rows:
        return None
    return Recorded(rows[META_MODEL], int(rows[META_DIMS]))


def table_exists(conn: Connection, table: VecTable = MEMORIES) -> bool:
    return conn.scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table.name,)) is not None


def mismatch(conn: Connection, model: str, dimensions: int | None) -> str | None:
    """Why vectors of (`model`, `dimensions`) cannot be used with this file, or None if they can."""
    rec = recorded(conn)
    if rec is None:
        return None
    if rec.model != model:
        return f"vectors on file were made by {rec.model!r} but {model!r} is configured; run `vantage-peers reindex`"
    if dimensions is not None and rec.dimensions != dimensions:
        return (f"vectors on file have {rec.dimensions} dimensions but {dimensions} are configured; "
                "run `vantage-peers reindex`")
    return None


def ensure(conn: Connection, model: str, dimensions: int, table: VecTable = MEMORIES) -> None:
    """Create `table` for (`model`, `dimensions`) on first use; refuse any other pair later."""
    problem = mismatch(conn, model, dimensions)
    if problem:
        raise ModelMismatch(problem)
    if table_exists(conn, table):
        return
    if conn.vec_version is None:
        raise ModelMismatch("the sqlite-vec extension is not loaded; vectors cannot be stored")
    conn.execute(
        f"CREATE VIRTUAL TABLE {table.name} USING vec0 ({table.columns_ddl}, "
        f"embedding float[{int(dimensions)}] distance_metric=cosine, chunk_size={CHUNK_SIZE})"
    )
    for sql in table.triggers.values():
        conn.execute(sql)
    if table.name == MEMORIES.name:
        ann.create(conn, table.name)  # sign codes for the approximate first pass (search/ann.py)
    conn.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                     [(META_MODEL, model), (META_DIMS, str(int(dimensions)))])


def drop(conn: Connection, tables: Sequence[VecTable] = (MEMORIES,)) -> None:
    """Forget every vector of `tables` and the recorded model (reindex starts from here)."""
    for table in tables:
        for name in table.triggers:
            conn.execute(f"DROP TRIGGER IF EXISTS {name}")
        if table_exists(conn, table):
            conn.execute(f"DROP TABLE {table.name}")
        ann.drop(conn, table.name)
    conn.execute("DELETE FROM meta WHERE key IN (?, ?)", (META_MODEL, META_DIMS))


def replace(conn: Connection, table: VecTable, rows: Sequence[tuple[int, Sequence[object], Sequence[float]]]) -> None:
    """(seq, column values in `table.columns` order, vector) rows; replaces any earlier vector."""
    if not rows:
        return
    names = ", ".join(table.columns)
    marks = ", ".join("?" for _ in table.columns)
    conn.executemany(f"DELETE FROM {table.name} WHERE rowid = ?", [(r[0],) for r in rows])
    conn.executemany(
        f"INSERT INTO {table.name} (rowid, {names}, embedding) VALUES (?, {marks}, ?)",
        [(seq, *values, pack(vec)) for seq, values, vec in rows],
    )
    if table.name == MEMORIES.name:
        ann.write(conn, table.name, [(seq, values[0], vec) for seq, values, vec in rows])


def upsert(conn: Connection, rows: Sequence[tuple[int, str, str, int, int | None, Sequence[float]]]) -> None:
    """Memory vectors: (seq, namespace, type, isLatest, expiresAt, vector) rows."""
    replace(conn, MEMORIES, [(seq, (ns, typ, int(latest), NO_EXPIRY if exp is None else exp), vec)
                             for seq, ns, typ, latest, exp, vec in rows])


def count(conn: Connection, table: VecTable = MEMORIES) -> int:
    return int(conn.scalar(f"SELECT count(*) FROM {table.name}")) if table_exists(conn, table) else 0


def nearest(conn: Connection, table: VecTable, vector: Sequence[float], *, k: int,
            clauses: Sequence[str] = (), params: Sequence[object] = ()) -> list[tuple[int, float]]:
    """KNN in `table`: (seq, cosine distance), nearest first; `clauses` filter on its columns inside the KNN."""
    where = ["embedding MATCH ?", "k = ?", *clauses]
    rows = conn.raw.execute(
        f"SELECT rowid, distance FROM {table.name} WHERE {' AND '.join(where)} ORDER BY distance",
        [pack(vector), max(1, min(k, MAX_K)), *params],
    ).fetchall()
    return [(int(seq), float(dist)) for seq, dist in rows]


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
        clauses.append("namespace >= ? AND namespace < ?")
        params.extend([low, high])
    if not include_superseded:
        clauses.append("isLatest = 1")
    if types:
        clauses.append(f"type IN ({','.join('?' for _ in types)})")
        params.extend(types)
    if approximate:
        # With a type filter: FILTER_OVERSAMPLE × more sign-code candidates, kept (in Hamming order)
        # when the memories table says they are live, latest and of the type — one indexed IN
        # query, far cheaper than vec0 lookups — and only those are rescored.
        # A type filter usually removes most candidates: pre-filter a larger set. Without one, the
        # rescoring's own filters (latest, unexpired) drop few, and the exact KNN covers a shortfall.
        factor = ann.FILTER_OVERSAMPLE if types else 1
        seqs = ann.candidates(conn, MEMORIES.name, vector, k=k, scope=scope, factor=factor)
        if seqs is not None:
            if types:
                seqs = _live_first(conn, seqs, types=types, include_superseded=include_superseded,
                                   now=now)[:ann.rescored(k)]
            hits = rescore(conn, MEMORIES, vector, seqs, k=k, clauses=clauses, params=params)
            if len(hits) >= k:
                return hits
    return nearest(conn, MEMORIES, vector, k=k, clauses=clauses, params=params)


def _live_first(conn: Connection, seqs: Sequence[int], *, types: Sequence[str] | None, include_superseded: bool,
                now: int) -> list[int]:
    """`seqs` (kept in order) whose memory is unexpired, latest unless `include_superseded`, of `types`."""
    where = ["(expiresAt IS NULL OR expiresAt > ?)"]
    params: list[object] = [now]
    if not include_superseded:
        where.append("isLatest = 1")
    if types:
        where.append(f"type IN ({','.join('?' for _ in types)})")
        params.extend(types)
    keep: set[int] = set()
    for start in range(0, len(seqs), 900):  # SQLite's bound-parameter budget
        part = list(seqs[start:start + 900])
        marks = ",".join("?" for _ in part)
        keep.update(int(r[0]) for r in conn.raw.execute(
            f"SELECT seq FROM memories WHERE seq IN ({marks}) AND {' AND '.join(where)}", [*part, *params]))
    return [seq for seq in seqs if seq in keep]


def rescore(conn: Connection, table: VecTable, vector: Sequence[float], seqs: Sequence[int], *, k: int,
            clauses: Sequence[str] = (), params: Sequence[object] = ()) -> list[tuple[int, float]]:
    """Exact cosine distances of `seqs` (those passing `clauses`), nearest first, at most k.

    One point lookup per row: vec0 answers `rowid = ?` from its rowid index, while `rowid IN (…)`
    scans the table."""
    where = " AND ".join(["rowid = ?", *clauses])
    sql = f"SELECT rowid, vec_distance_cosine(embedding, ?) FROM {table.name} WHERE {where}"
    blob = pack(vector)
    cur = conn.raw.cursor()
    out = []
    for seq in seqs:
        for rowid, dist in cur.execute(sql, [blob, seq, *params]):
            out.append((int(rowid), float(dist)))
    out.sort(key=lambda hit: (hit[1], hit[0]))
    return out[:k]
