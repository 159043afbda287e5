"""PostgreSQL behind the same `Database` / `Connection` API as the SQLite file (issue #25).

`VP_DATABASE_URL=postgresql://…` selects it; psycopg is an optional extra (`vantage-peers[postgres]`)
imported only here. What differs from SQLite is kept in `db/` (dialect.py rewrites the SQL, this module
runs it) and `search/` (full text and vectors), so domain stores are the same code on both.

Guarantees, as on SQLite: every `write` is one transaction, retried as a whole on a conflict within
the call's busy budget and `BUSY` after it. SQLite gets them by serializing writers (`BEGIN
IMMEDIATE`); PostgreSQL lets writers run side by side under SERIALIZABLE isolation, which aborts
one of two transactions whose reads and writes could not have happened one after the other
(40001) — the read-then-write patterns of the stores (one checkout winner, one receipt per
recipient, one firing per occurrence) stay exactly-once without a table lock. Reads run in one
REPEATABLE READ snapshot. A row lock waited on longer than the budget (`lock_timeout`) is BUSY too.

Connections come from one pool per process (`VP_PG_POOL_SIZE`, default 10): a transaction borrows one
and gives it back; size it so that processes × pool stays under the server's `max_connections`.
Every write transaction ends with `pg_notify('vp_commit')`, which `Watcher` listens to: the
equivalent of SQLite's `PRAGMA data_version` for `wait`, subscriptions and the dashboard.
"""

from __future__ import annotations

import contextlib
import decimal
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from ..core.errors import InvalidArgument, VantageError
from . import busy
from .busy import CallScope
from .dialect import identifiers, to_postgres
from .statements import RawStatements
from .watch import PollingWatcher

try:
    import psycopg
    import psycopg_pool
    from psycopg import errors as pg_errors
except ImportError:  # pragma: no cover - the extra is not installed
    psycopg = None  # type: ignore[assignment]

T = TypeVar("T")
Row = dict[str, Any]

NOTIFY_CHANNEL = "vp_commit"
_WRITE_END = f"SELECT pg_notify('{NOTIFY_CHANNEL}', ''); COMMIT"  # the notice is delivered only if COMMIT succeeds


class PostgresMissing(VantageError):
    code = "CONFIG"


class PostgresUnavailable(VantageError):
    code = "STORAGE_IO"


def _need_driver() -> None:
    if psycopg is None:
        raise PostgresMissing("VP_DATABASE_URL names PostgreSQL but its driver is not installed: "
                              "install vantage-peers[postgres] (psycopg and psycopg-pool)")


class Reconnect(Exception):
    """The pooled connection died before COMMIT was sent (a server restart, a failover, an idle timeout):
    nothing of the transaction was kept, so it runs again on a fresh connection."""


class ConcurrentInsert(Exception):
    """A SERIALIZABLE write hit a unique key another transaction inserted meanwhile. PostgreSQL may
    report that as unique_violation instead of a serialization failure (its docs advise retrying
    23505 under SERIALIZABLE): the transaction runs again and now reads the other's row."""


UNIQUE_RETRIES = 2  # a key that is still taken after this many fresh runs is a real duplicate


def retryable() -> tuple[type[BaseException], ...]:
    """Conflicts that mean "the same transaction again may succeed": serialization, deadlock, lock wait,
    a lost connection (before COMMIT), no free connection in the pool, a concurrent insert."""
    return (pg_errors.SerializationFailure, pg_errors.DeadlockDetected, pg_errors.LockNotAvailable,
            psycopg_pool.PoolTimeout, Reconnect, ConcurrentInsert)


def _schema_names() -> dict[str, str]:
    """camelCase names of every table and column in every step (a column added by a migration comes
    back from `SELECT *` under its own spelling too)."""
    from .migrate import pg_steps

    text = "\n".join(sql for _, _, sql in pg_steps())
    return identifiers(re.sub(r"--[^\n]*", "", text))  # comments hold prose ("Version 18"), not names


NUL_MESSAGE = ("a text argument holds a NUL character (\\x00), which PostgreSQL cannot store; "
               "remove it and call again")


@contextlib.contextmanager
def _nul_refused() -> Iterator[None]:
    """PostgreSQL refuses U+0000 in TEXT (SQLite stores it): the agent gets INVALID_ARGUMENT, not a crash.
    psycopg refuses it client-side (DataError); the call's transaction is rolled back like any refusal."""
    try:
        yield
    except pg_errors.UntranslatableCharacter as exc:  # '\u0000' in a ::jsonb cast
        raise InvalidArgument(NUL_MESSAGE) from exc
    except psycopg.DataError as exc:
        if "NUL" not in str(exc) and "0x00" not in str(exc):
            raise
        raise InvalidArgument(NUL_MESSAGE) from exc


def _bind(params: Sequence[Any] | dict[str, Any], numbered: bool) -> tuple[Any, ...] | dict[str, Any]:
    """Parameters as psycopg takes them: `?N` statements bind a dict of pN, the others a tuple."""
    if isinstance(params, dict):
        if params:
            raise ValueError("named :parameters are not supported on PostgreSQL; use ? or ?N")
        return {} if numbered else ()
    return {f"p{i + 1}": v for i, v in enumerate(params)} if numbered else tuple(params)


_AS_IS = frozenset({int, float, str, type(None)})  # most values: returned without the checks below


def _plain(value: Any) -> Any:
    """Values as SQLite would give them: numbers not Decimal, booleans as 0/1, bytes not memoryview."""
    if type(value) in _AS_IS:
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, memoryview):
        return bytes(value)
    return value


class PgConnection(RawStatements):
    """One pooled psycopg connection with the SQLite Connection's methods (dict rows, `?` placeholders)."""

    backend = "postgres"

    def __init__(self, raw: Any, db: PgDatabase) -> None:
        self._raw = raw
        self.db = db
        self.in_tx: str | None = None
        # The transaction's opening statements, not sent yet: they go in one round trip with the
        # first statement (`_cursor`, `query_between`), or alone when the raw connection is reached
        # (`raw`). A transaction that runs nothing sends nothing.
        self.opening: list[str] = []
        self.closed = False
        self.vec_version = db.vec_version
        self.busy_timeout_ms = db.busy_timeout_ms
        self.journal_mode = "postgres"

    def take_opening(self) -> list[str]:
        """The opening statements not sent yet, now no longer pending (the caller sends them, or the
        transaction ends without them: then nothing of it reached the server)."""
        opening, self.opening = self.opening, []
        return opening

    @property
    def raw(self) -> Any:
        """The psycopg connection, inside the transaction (its opening is sent first if it is pending)."""
        opening = self.take_opening()
        if opening:
            self._raw.execute("; ".join(opening))
        return self._raw

    def _cursor(self, sql: str, params: Sequence[Any] | dict[str, Any]) -> Any:
        text, numbered = to_postgres(sql)
        opening = self.take_opening()
        cur = self._raw.cursor()
        with _nul_refused(), self._raw.pipeline() if opening else contextlib.nullcontext():
            for statement in opening:  # one round trip with the statement (pipeline mode)
                self._raw.execute(statement)
            cur.execute(text, _bind(params, numbered))
        return cur

    def _dicts(self, sql: str, cur: Any, rows: Any) -> Iterator[Row]:
        """`rows` of `cur` as dicts, under the names the SQL (and the schema) spell."""
        names, local = self.db.names, identifiers(sql)
        keys = [local.get(d.name, names.get(d.name, d.name)) for d in cur.description]
        for row in rows:
            yield {key: _plain(value) for key, value in zip(keys, row, strict=True)}

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Row]:
        return list(self.iterate(sql, params))

    def iterate(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Iterator[Row]:
        cur = self._cursor(sql, params)
        if cur.description is not None:
            yield from self._dicts(sql, cur, cur)

    def rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        """Plain tuples (the `conn.raw.execute(...)` of the SQLite connection)."""
        return list(self.iterate_rows(sql, params))

    def iterate_rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Iterator[tuple[Any, ...]]:
        cur = self._cursor(sql, params)
        yield from ((tuple(_plain(v) for v in row) for row in cur) if cur.description is not None else ())

    def query_between(self, before: Sequence[str], sql: str, params: Sequence[Any], after: Sequence[str]) -> list[Row]:
        """`query`, with plain statements (no parameters) sent before and after it in one round trip
        (pipeline mode): search/budget.py wraps a search in a savepoint and a statement_timeout this way.
        An error in any of them is raised after the pipeline ends; the caller restores the transaction."""
        with self._raw.pipeline():
            for statement in [*self.take_opening(), *before]:
                self._raw.execute(statement)
            cur = self._cursor(sql, params)
            for statement in after:
                self._raw.execute(statement)
        return [] if cur.description is None else list(self._dicts(sql, cur, cur.fetchall()))

    def one(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Row | None:
        for row in self.iterate(sql, params):
            return row
        return None

    def scalar(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        cur = self._cursor(sql, params)
        if cur.description is None:
            return None
        row = cur.fetchone()
        return None if row is None else _plain(row[0])

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> int:
        cur = self._cursor(sql, params)
        return max(0, cur.rowcount)

    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> None:
        text, numbered = to_postgres(sql)
        batch = [_bind(p, numbered) for p in seq]
        if batch:
            with _nul_refused():
                self.raw.cursor().executemany(text, batch)

    def close(self) -> None:
        self.closed = True


class PgDatabase:
    """The PostgreSQL counterpart of `connection.Database`: same write/read/call_scope/close."""

    backend = "postgres"
    runs_inline = False  # every statement is a round trip and may wait on a row lock: never on the event loop

    def __init__(self, url: str, *, busy_timeout_ms: int = 5_000, search_budget_ms: int = 2_000,
                 pool_size: int = 10) -> None:
        _need_driver()
        self.url = url
        self.path = redacted(url)  # what messages name as "the database"
        self.busy_timeout_ms = busy_timeout_ms
        self.search_budget_ms = search_budget_ms
        self.journal_mode = "postgres"
        self.journal_warning: str | None = None
        self.guard = None
        self._local = threading.local()
        self.pool = psycopg_pool.ConnectionPool(url, min_size=1, max_size=max(1, pool_size), open=False,
                                                kwargs={"autocommit": True}, name="vantage-peers",
                                                timeout=max(1.0, busy_timeout_ms / 1000))
        try:
            self.pool.open(wait=True, timeout=min(30.0, max(5.0, busy_timeout_ms / 1000)))
        except psycopg_pool.PoolTimeout as exc:
            self.pool.close()
            raise PostgresUnavailable(f"no connection to {self.path} could be opened: is the server running, and "
                                      "are VP_DATABASE_URL's host, port, user and password right?") from exc
        with self.pool.connection() as raw:
            raw.execute("CREATE EXTENSION IF NOT EXISTS vector")
            found = raw.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        self.vec_version = found[0] if found else None
        self.names = _schema_names()

    # The thread's connection outside a transaction (migrations' version check, doctor): borrowed and kept.
    @property
    def conn(self) -> PgConnection:
        current = getattr(self._local, "conn", None)
        if current is not None:
            return current
        kept = getattr(self._local, "kept", None)
        if kept is None:
            raw = self.pool.getconn()
            kept = self._local.kept = PgConnection(raw, self)
        return kept

    @contextlib.contextmanager
    def _borrowed(self) -> Iterator[PgConnection]:
        with self.pool.connection() as raw:
            conn = PgConnection(raw, self)
            self._local.conn = conn
            try:
                yield conn
            finally:
                self._local.conn = None

    def inline(self) -> contextlib.AbstractContextManager[None]:
        raise RuntimeError("PostgreSQL calls run on worker threads (runs_inline is False)")

    @contextlib.contextmanager
    def call_scope(self, busy_ms: int | None = None) -> Iterator[CallScope]:
        budget = self.busy_timeout_ms if busy_ms is None else busy_ms
        with busy.call_scope(budget, self.search_budget_ms) as scope:
            yield scope

    def _run(self, fn: Callable[[PgConnection], T], begin: str, kind: str) -> T:
        current = getattr(self._local, "conn", None)
        if current is not None and current.in_tx:
            if kind == "write" and current.in_tx == "read":
                raise RuntimeError("write() inside read(): start the outer transaction with write()")
            return fn(current)
        with busy.call_scope(self.busy_timeout_ms, self.search_budget_ms) as scope:
            unique_hits = [0]

            def attempt() -> T:
                with self._borrowed() as conn:
                    raw = conn._raw
                    conn.in_tx = kind
                    committing = False
                    try:
                        # Opened with the first statement (PgConnection.opening), closed in one round
                        # trip: a row lock held by another transaction is waited on at most what is left
                        # of the budget.
                        conn.opening = [begin, f"SET LOCAL lock_timeout = {max(1, scope.remaining_ms())}"]
                        result = fn(conn)
                        conn.in_tx = None
                        committing = True  # from here a lost connection leaves the outcome unknown
                        if not conn.take_opening():  # opened (still pending: nothing was sent, nothing to end)
                            raw.execute(_WRITE_END if kind == "write" else "COMMIT")
                        return result
                    except psycopg.OperationalError as exc:
                        conn.in_tx = None
                        if raw.broken and not committing:
                            raise Reconnect(str(exc)) from exc
                        raise
                    except pg_errors.UniqueViolation as exc:
                        conn.in_tx = None
                        with contextlib.suppress(Exception):
                            raw.execute("ROLLBACK")
                        if kind == "write" and unique_hits[0] < UNIQUE_RETRIES:
                            unique_hits[0] += 1
                            raise ConcurrentInsert(str(exc)) from exc
                        raise
                    except BaseException:
                        conn.in_tx = None
                        if not conn.take_opening():  # opened (still pending: refused before its first statement)
                            with contextlib.suppress(Exception):
                                raw.execute("ROLLBACK")
                        raise

            return busy.retry(attempt, scope, errors=retryable())

    def write(self, fn: Callable[[PgConnection], T]) -> T:
        return self._run(fn, "BEGIN ISOLATION LEVEL SERIALIZABLE", "write")

    def read(self, fn: Callable[[PgConnection], T]) -> T:
        return self._run(fn, "BEGIN ISOLATION LEVEL REPEATABLE READ", "read")

    def open_connections(self) -> int:
        return int(self.pool.get_stats().get("pool_size", 0))

    def watcher(self, *, interval: float = 0.2) -> PollingWatcher:
        from .pg.watcher import PgWatcher

        return PgWatcher(self.url, interval=interval)

    def close(self) -> None:
        kept = getattr(self._local, "kept", None)
        if kept is not None:
            with contextlib.suppress(Exception):
                self.pool.putconn(kept.raw)
            self._local.kept = None
        with contextlib.suppress(Exception):
            self.pool.close()


def redacted(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - a message detail only
        return "the PostgreSQL database"
    host = parts.get("host") or "localhost"
    return f"postgresql://{parts.get('user') or ''}@{host}/{parts.get('dbname') or ''}"

