"""Which search implementation a database uses, chosen once per database (issue #33).

Keyword search, its time budget, vectors and the sign codes differ between SQLite (FTS5, a progress
handler, vec0, search/ann.py) and PostgreSQL (tsvector side tables with BM25 computed in
search/pg_fts.py, a savepoint with `statement_timeout`, pgvector with HNSW). `of(conn)` resolves the
`SearchBackend` of the connection's database once and remembers it for that database; the search
modules (budget, keyword, vectors, ann) call through it instead of testing the backend on every call.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class VectorOps(Protocol):
    """search/sqlite_vectors.py and search/pg_vectors.py: one vector table per VecTable."""

    def exists(self, conn: Any, table: Any) -> bool: ...
    def create(self, conn: Any, table: Any, dimensions: int) -> None: ...
    def drop(self, conn: Any, table: Any) -> None: ...
    def replace(self, conn: Any, table: Any, rows: Sequence[tuple[int, Sequence[object], Sequence[float]]]) -> None: ...
    def nearest(self, conn: Any, table: Any, vector: Sequence[float], *, k: int, clauses: Sequence[str],
                params: Sequence[object]) -> list[tuple[object, object]]: ...
    def rescore(self, conn: Any, table: Any, vector: Sequence[float], seqs: Sequence[int], *,
                clauses: Sequence[str], params: Sequence[object]) -> list[tuple[object, object]]: ...


@dataclass(frozen=True)
class SearchBackend:
    name: str  # "sqlite" or "postgres"
    keyword_rows: Callable[..., list[dict[str, Any]]]  # the ranked rows of one full-text index
    bounded_query: Callable[..., list[dict[str, Any]]]  # (conn, sql, params, scope, deadline): under the budget
    budget_needs_transaction: bool  # PostgreSQL's budget is a savepoint: it applies inside a transaction only
    vectors: VectorOps
    bits_columns: str  # search/ann.py's bits table: its columns in this database's types
    table_exists: Callable[[Any, str], bool]
    has_column: Callable[[Any, str, str], bool]  # (conn, table, column)


# INTEGER PRIMARY KEY is SQLite's rowid itself (no second index); PostgreSQL's INTEGER is 32 bits.
_BITS = "seq {key} PRIMARY KEY, gen BIGINT NOT NULL, part TEXT, bits {blob} NOT NULL, q8 {blob}"


@functools.cache
def _build(name: str) -> SearchBackend:
    # Imported here: these modules import this one.
    from . import budget, keyword

    if name == "postgres":
        from . import pg_vectors

        return SearchBackend(name="postgres", keyword_rows=keyword.pg_rows, bounded_query=budget.pg_query,
                             budget_needs_transaction=True, vectors=pg_vectors,
                             bits_columns=_BITS.format(key="BIGINT", blob="BYTEA"),
                             table_exists=pg_vectors.table_exists, has_column=pg_vectors.has_column)
    from . import sqlite_vectors

    return SearchBackend(name="sqlite", keyword_rows=keyword.sqlite_rows, bounded_query=budget.sqlite_query,
                         budget_needs_transaction=False, vectors=sqlite_vectors,
                         bits_columns=_BITS.format(key="INTEGER", blob="BLOB"),
                         table_exists=sqlite_vectors.table_exists, has_column=sqlite_vectors.has_column)


_chosen: weakref.WeakKeyDictionary[Any, SearchBackend] = weakref.WeakKeyDictionary()


def of(conn: Any) -> SearchBackend:
    """The search implementation of `conn`'s database, resolved on the first call for that database.
    A PostgreSQL connection (one per transaction) names its database (`conn.db`); a SQLite connection is
    its thread's for the life of the database, so it is its own key."""
    owner = getattr(conn, "db", None) or conn
    with contextlib.suppress(KeyError, TypeError):  # TypeError: an object without weak references
        return _chosen[owner]
    chosen = _build(getattr(conn, "backend", "sqlite"))
    with contextlib.suppress(TypeError):
        _chosen[owner] = chosen
    return chosen
