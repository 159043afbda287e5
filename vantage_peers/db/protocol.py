"""The interface both backends implement (issue #33): `connection.Database`/`Connection` (the SQLite
file) and `postgres.PgDatabase`/`PgConnection`. Stores, search and migrations use only what is declared
here, so neither class needs the other's shape papered over; tests/db/test_protocol.py checks that both
classes have every member with the same signature.

Backend-specific extras stay off the protocol and are reached only where the backend is known
(`search/backend.py`, `db/introspect.py`): PostgreSQL's `query_between` and `db.names`, SQLite's
`generation` and file guard internals.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from .busy import CallScope

T = TypeVar("T")
Row = dict[str, Any]
Params = Sequence[Any] | dict[str, Any]


@runtime_checkable
class ConnectionAPI(Protocol):
    """One connection inside a transaction: dict rows, `?`/`?N` placeholders, SQLite's SQL dialect."""

    backend: str  # "sqlite" or "postgres"
    raw: Any  # the driver's connection (apsw / psycopg), for `script` and savepoints
    vec_version: str | None  # sqlite-vec's or pgvector's version; None without vectors
    busy_timeout_ms: int
    journal_mode: str
    closed: bool
    in_tx: str | None  # "read" or "write" while a transaction is open

    def query(self, sql: str, params: Params = ()) -> list[Row]: ...
    def iterate(self, sql: str, params: Params = ()) -> Iterator[Row]: ...
    def one(self, sql: str, params: Params = ()) -> Row | None: ...
    def scalar(self, sql: str, params: Params = ()) -> Any: ...
    def execute(self, sql: str, params: Params = ()) -> int: ...
    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> None: ...
    def rows(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]: ...
    def iterate_rows(self, sql: str, params: Params = ()) -> Iterator[tuple[Any, ...]]: ...
    def script(self, sql: str) -> None: ...
    def savepoint(self, name: str) -> contextlib.AbstractContextManager[None]: ...
    def close(self) -> None: ...


@runtime_checkable
class DatabaseAPI(Protocol):
    """One database: transactions (`write` serializable and retried, `read` one snapshot), the call's
    busy budget, change notices, and what `doctor`/`status` report."""

    backend: str
    path: Any  # the file, or the redacted URL: what messages name as "the database"
    busy_timeout_ms: int
    search_budget_ms: int
    journal_mode: str
    journal_warning: str | None
    guard: Any  # SQLite's FileGuard; None on PostgreSQL
    runs_inline: bool  # a quick call may run on the event loop (SQLite: no network, no row-lock waits)

    @property
    def conn(self) -> Any: ...  # the thread's connection outside a transaction (ConnectionAPI)
    def write(self, fn: Callable[[Any], T]) -> T: ...
    def read(self, fn: Callable[[Any], T]) -> T: ...
    def call_scope(self, busy_ms: int | None = None) -> contextlib.AbstractContextManager[CallScope]: ...
    def inline(self) -> contextlib.AbstractContextManager[None]: ...  # core.inline.running where runs_inline
    def open_connections(self) -> int: ...
    def watcher(self, *, interval: float = 0.2) -> Any: ...
    def close(self) -> None: ...
