"""Vectors in sqlite-vec `vec0` tables, one per embedded table, keyed by the source row's `seq`.

`VecTable` describes one such table (its columns and the triggers that keep it in step with its
source rows); the model and dimension recorded in `meta` hold for every table of the file. The
tables themselves are declared where they are used (the memory table lives with the memory store).

- The table is created on the first successful embedding, when the dimension is known; the model
  and dimension are recorded for the table (`vectorModels`, one row per vector table) and for the
  file (`meta`). A later, different model or dimension is a mismatch: nothing is written with it
  until `vantage-peers reindex` rebuilds: with the same model it drops the table and re-embeds; with
  another it *switches* (search/vector_switch.py): the new vectors fill a staged table beside the
  index (`staged`, `<name>_next`) while queries keep using the old one, and the staged table
  replaces it in one transaction at the end. A query compares its vector only
  with a table recorded for the model that embedded it (`table_model`): no search mixes two models.
- Triggers created with the table keep the metadata in step with the source rows, whoever
  changes them.
- `chunk_size` is small because vec0 allocates a whole chunk per partition: the default (1024
  vectors × 6 KB at 1536 dims) would cost 6 MB for every partition holding even one row.
- The vec0 work is search/sqlite_vectors.py; on PostgreSQL the same functions use a pgvector table
  with an HNSW index (search/pg_vectors.py), chosen once per database by search/backend.py; a
  VecTable carries both backends' triggers (`triggers` for SQLite, `pg_triggers` for PostgreSQL).
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..core.ids import now_ms
from ..db import Connection
from . import backend

CHUNK_SIZE = 64
META_MODEL = "embedding.model"
META_DIMS = "embedding.dimensions"
META_SWITCH = "embedding.switch"  # the model a switch is building its vectors with (search/vector_switch.py)
META_SOURCE = "embedding.source:"  # + model id: where that model comes from (JSON, embedding/loadable.py)
STAGED = "_next"  # suffix of the table a switch builds beside the index it will replace
NO_EXPIRY = 1 << 62  # metadata columns cannot be NULL-compared inside a KNN; "never" is far future
MAX_K = 4096  # vec0's own limit on k


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
    # PostgreSQL: name -> DDL of a plpgsql function of that name and the trigger running it.
    pg_triggers: Mapping[str, str] = field(default_factory=dict)
    ann: bool = False  # keep sign codes for the approximate first pass (search/ann.py) beside it


def stale_triggers(source: str, table: str, watched: str) -> tuple[dict[str, str], dict[str, str]]:
    """The triggers that drop a row's vector of `table` when its embedded columns (`watched`) change or
    the `source` row is deleted, as (SQLite's, PostgreSQL's) for a VecTable; the source's own trigger
    queues the changed row for embedding again."""
    sqlite = {
        f"{table}_stale": f"""
            CREATE TRIGGER {table}_stale AFTER UPDATE OF {watched} ON {source} BEGIN
                DELETE FROM {table} WHERE rowid = old.seq;
            END""",
        f"{table}_delete": f"""
            CREATE TRIGGER {table}_delete AFTER DELETE ON {source} BEGIN
                DELETE FROM {table} WHERE rowid = old.seq;
            END""",
    }
    postgres = {  # one function serves both triggers (dropping it drops them)
        f"{table}_stale": f"""
            CREATE FUNCTION {table}_stale() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
                DELETE FROM {table} WHERE seq = OLD.seq;
                RETURN NULL;
            END $$;
            CREATE TRIGGER {table}_stale AFTER UPDATE OF {watched} ON {source}
                FOR EACH ROW EXECUTE FUNCTION {table}_stale();
            CREATE TRIGGER {table}_delete AFTER DELETE ON {source}
                FOR EACH ROW EXECUTE FUNCTION {table}_stale();""",
    }
    return sqlite, postgres


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


class QueryVector(list):  # type: ignore[type-arg]
    """A query embedding that knows its model: `nearest` and `rescore` compare it only with a table
    recorded for that model, checked in the search's own read (a switch may complete in between)."""

    def __init__(self, values: Sequence[float], model: str) -> None:
        super().__init__(values)
        self.model = model


def _other_model(conn: Connection, table: VecTable, vector: Sequence[float]) -> bool:
    model = getattr(vector, "model", None)
    return model is not None and table_mismatch(conn, table, model, len(vector)) is not None


def pack(vector: Sequence[float]) -> bytes:
    """float32 bytes for vec0; numpy float32 rows (the embedding providers' output) without a copy per float."""
    if getattr(vector, "dtype", None) is not None and str(vector.dtype) == "float32":  # type: ignore[attr-defined]
        return vector.tobytes()  # type: ignore[attr-defined]
    return array("f", vector).tobytes()


def unusable(vector: Sequence[float]) -> str | None:
    """Why `vector` cannot be compared by cosine (zero norm, NaN or infinity), or None if it can.

    sqlite-vec answers NULL for a cosine distance to a zero vector; an endpoint may return one for
    an input it cannot embed (e.g. `(((`). Callers skip such a vector and say why."""
    values = [float(x) for x in vector]
    if not values:
        return "the embedding is empty"
    if not all(math.isfinite(x) for x in values):
        return "the embedding holds NaN or infinite values"
    if math.fsum(x * x for x in values) <= 1e-20:
        return "the embedding is a zero vector"
    return None


def _distances(rows: Sequence[tuple[object, object]]) -> list[tuple[int, float]]:
    """(seq, distance) rows without NULL or non-finite distances (a stored zero vector compares as NULL)."""
    out = []
    for seq, dist in rows:
        if dist is None:
            continue
        value = float(dist)  # type: ignore[arg-type]
        if math.isfinite(value):
            out.append((int(seq), value))  # type: ignore[call-overload]
    return out


def recorded(conn: Connection) -> Recorded | None:
    rows = {r["key"]: r["value"] for r in conn.query(
        "SELECT key, value FROM meta WHERE key IN (?, ?)", (META_MODEL, META_DIMS))}
    if META_MODEL not in rows or META_DIMS not in rows:
        return None
    return Recorded(rows[META_MODEL], int(rows[META_DIMS]))


def table_model(conn: Connection, table: VecTable) -> Recorded | None:
    """The model and dimension `table`'s vectors were made with (None before its first vector)."""
    row = conn.one("SELECT model, dimensions FROM vectorModels WHERE name = ?", (table.name,))
    return Recorded(row["model"], int(row["dimensions"])) if row else None


def table_mismatch(conn: Connection, table: VecTable, model: str, dimensions: int | None) -> str | None:
    """Why a vector of (`model`, `dimensions`) may not be compared with or written into `table`."""
    rec = table_model(conn, table)
    if rec is None:
        return None
    if rec.model != model:
        return (f"the {table.label} vectors on file were made by {rec.model!r} but {model!r} is configured; "
                "run `vantage-peers reindex`")
    if dimensions is not None and rec.dimensions != dimensions:
        return (f"the {table.label} vectors on file have {rec.dimensions} dimensions but {dimensions} are "
                "configured; run `vantage-peers reindex`")
    return None


def staged(table: VecTable) -> VecTable:
    """The table a model switch fills beside `table` (`memories_vec_next`), with its own triggers
    (renamed: they keep its rows in step with the source like the index's) and no sign codes (the
    index gets them when the switch completes)."""
    name = table.name + STAGED

    def rename(text: str) -> str:
        return re.sub(rf"\b{re.escape(table.name)}", name, text)

    return VecTable(name=name, label=table.label, columns_ddl=table.columns_ddl, columns=table.columns,
                    triggers={rename(k): rename(v) for k, v in table.triggers.items()},
                    pg_triggers={rename(k): rename(v) for k, v in table.pg_triggers.items()}, ann=False)


def switch_target(conn: Connection) -> str | None:
    """The model a switch under way is building the index with (None when there is no switch)."""
    value = conn.scalar("SELECT value FROM meta WHERE key = ?", (META_SWITCH,))
    return str(value) if value else None


def table_exists(conn: Connection, table: VecTable) -> bool:
    return backend.of(conn).vectors.exists(conn, table)


def mismatch(conn: Connection, model: str, dimensions: int | None) -> str | None:
    """Why vectors of (`model`, `dimensions`) cannot be used with this file, or None if they can."""
    rec = recorded(conn)
    if rec is None or switch_target(conn) == model:  # a switch writes `model`'s vectors to staged tables
        return None
    if rec.model != model:
        return f"vectors on file were made by {rec.model!r} but {model!r} is configured; run `vantage-peers reindex`"
    if dimensions is not None and rec.dimensions != dimensions:
        return (f"vectors on file have {rec.dimensions} dimensions but {dimensions} are configured; "
                "run `vantage-peers reindex`")
    return None


def ensure(conn: Connection, model: str, dimensions: int, table: VecTable) -> VecTable:
    """The table vectors of (`model`, `dimensions`) go to: `table` (created on first use), or its
    staged table while a switch to `model` is under way; any other pair is refused."""
    if switch_target(conn) == model and table_model(conn, table) != Recorded(model, dimensions):
        table = staged(table)
        problem = table_mismatch(conn, table, model, dimensions)
        if problem:
            raise ModelMismatch(problem)
        if not table_exists(conn, table):
            _create(conn, table, dimensions)
            record(conn, table, model, dimensions)
        return table
    problem = mismatch(conn, model, dimensions) or table_mismatch(conn, table, model, dimensions)
    if problem:
        raise ModelMismatch(problem)
    if table_exists(conn, table):
        if table_model(conn, table) is None:  # made before the per-table record: the file's record holds
            record(conn, table, model, dimensions)
        return table
    _create(conn, table, dimensions)
    record(conn, table, model, dimensions)
    record_file(conn, model, dimensions)
    return table


def _create(conn: Connection, table: VecTable, dimensions: int) -> None:
    if conn.vec_version is None:
        raise ModelMismatch("the vector extension (sqlite-vec, or pgvector on PostgreSQL) is not loaded; "
                            "vectors cannot be stored")
    backend.of(conn).vectors.create(conn, table, dimensions)


def record_file(conn: Connection, model: str, dimensions: int) -> None:
    """The file-wide record (`meta`): the model every vector table of the file holds."""
    conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                     [(META_MODEL, model), (META_DIMS, str(int(dimensions)))])


def record_source(conn: Connection, model: str, source: str | None) -> None:
    """Where `model` comes from (embedding/loadable.py's JSON), so a switch can embed queries with it."""
    if source:
        conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                     (META_SOURCE + model, source))


def source_of(conn: Connection, model: str) -> str | None:
    value = conn.scalar("SELECT value FROM meta WHERE key = ?", (META_SOURCE + model,))
    return str(value) if value else None


def record(conn: Connection, table: VecTable, model: str, dimensions: int) -> None:
    conn.execute("INSERT INTO vectorModels (name, model, dimensions, createdAt) VALUES (?, ?, ?, ?) "
                 "ON CONFLICT (name) DO UPDATE SET model = excluded.model, dimensions = excluded.dimensions, "
                 "createdAt = excluded.createdAt", (table.name, model, int(dimensions), now_ms()))


def drop(conn: Connection, tables: Sequence[VecTable]) -> None:
    """Forget every vector of `tables` (and of their staged tables: a switch left unfinished) and the
    recorded model (a reindex with the index's own model starts from here)."""
    for table in [*tables, *(staged(t) for t in tables)]:
        backend.of(conn).vectors.drop(conn, table)
        conn.execute("DELETE FROM vectorModels WHERE name = ?", (table.name,))
    conn.execute("DELETE FROM meta WHERE key IN (?, ?, ?)", (META_MODEL, META_DIMS, META_SWITCH))


def replace(conn: Connection, table: VecTable, rows: Sequence[tuple[int, Sequence[object], Sequence[float]]]) -> None:
    """(seq, column values in `table.columns` order, vector) rows; replaces any earlier vector."""
    if rows:
        backend.of(conn).vectors.replace(conn, table, rows)


def count(conn: Connection, table: VecTable) -> int:
    return int(conn.scalar(f"SELECT count(*) FROM {table.name}")) if table_exists(conn, table) else 0


def nearest(conn: Connection, table: VecTable, vector: Sequence[float], *, k: int,
            clauses: Sequence[str] = (), params: Sequence[object] = ()) -> list[tuple[int, float]]:
    """KNN in `table`: (seq, cosine distance), nearest first; `clauses` filter on its columns inside the KNN."""
    if unusable(vector) or _other_model(conn, table, vector):
        return []
    return _distances(backend.of(conn).vectors.nearest(conn, table, vector, k=max(1, min(k, MAX_K)),
                                                       clauses=clauses, params=params))


def rescore(conn: Connection, table: VecTable, vector: Sequence[float], seqs: Sequence[int], *, k: int,
            clauses: Sequence[str] = (), params: Sequence[object] = ()) -> list[tuple[int, float]]:
    """Exact cosine distances of `seqs` (those passing `clauses`), nearest first, at most k."""
    if unusable(vector) or _other_model(conn, table, vector):
        return []
    hits = _distances(backend.of(conn).vectors.rescore(conn, table, vector, seqs, clauses=clauses, params=params))
    hits.sort(key=lambda hit: (hit[1], hit[0]))
    return hits[:k]
