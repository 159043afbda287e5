"""apsw connections: one per thread, pragmas, sqlite-vec loaded, `BEGIN IMMEDIATE` writes with retry.

Several server processes share one file. Every mutation runs in one short `BEGIN IMMEDIATE`
transaction (the write lock is taken up front, so two writers never deadlock upgrading a read
lock), and `SQLITE_BUSY` is retried with jittered backoff on top of SQLite's busy timeout.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import apsw

from ..errors import Busy

T = TypeVar("T")
Row = dict[str, Any]

_BUSY_ERRORS = (apsw.BusyError, apsw.LockedError)


def _load_vec(conn: apsw.Connection) -> str | None:
    """Load sqlite-vec; returns its version, or None when the extension is unavailable."""
    try:
        import sqlite_vec

        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        conn.enable_load_extension(False)
        return conn.execute("SELECT vec_version()").fetchall()[0][0]
    except Exception:  # noqa: BLE001 - a missing extension degrades vector search, nothing else
        return None


MMAP_BYTES = 1 << 30


class Connection:
    """A thin wrapper over one apsw connection with dict rows."""

    def __init__(self, path: Path | str, *, journal_mode: str = "wal", busy_timeout_ms: int = 10_000) -> None:
        self.raw = apsw.Connection(str(path))
        self.raw.set_busy_timeout(busy_timeout_ms)
        self.vec_version = _load_vec(self.raw)
        self.raw.execute("PRAGMA foreign_keys=ON")
        self.raw.execute("PRAGMA synchronous=NORMAL")
        self.raw.execute("PRAGMA temp_store=MEMORY")
        current = self.raw.execute("PRAGMA journal_mode").fetchall()[0][0]
        if current.lower() != journal_mode:
            _retry_busy(lambda: self.raw.execute(f"PRAGMA journal_mode={journal_mode}").fetchall())
        if journal_mode == "wal":
            # Memory-mapped reads: vec0's KNN scans its vector chunks through the page cache without
            # a copy per page (benchmarks/search.py: namespaced hybrid_search at 100k -36%). WAL
            # means a local disk (network drives run VP_JOURNAL_MODE=delete), where mmap is safe;
            # the mapping is shared between processes, not private memory.
            self.raw.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
        self.in_tx: str | None = None  # "read" or "write" while a transaction is open

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Row]:
        cur = self.raw.cursor()
        cur.execute(sql, params)
        try:
            names = [d[0] for d in cur.get_description()]
        except apsw.ExecutionCompleteError:
            return []
        return [dict(zip(names, row, strict=True)) for row in cur]

    def one(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Row | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def scalar(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        for row in self.raw.execute(sql, params):
            return row[0]
        return None

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> int:
        """Run one statement; returns the number of rows it changed."""
        self.raw.execute(sql, params)
        return self.raw.changes()

    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> None:
        self.raw.executemany(sql, seq)

    def close(self) -> None:
        self.raw.close()


def _retry_busy(fn: Callable[[], T], attempts: int = 12) -> T:
    delay = 0.005
    for attempt in range(attempts):
        try:
            return fn()
        except _BUSY_ERRORS:
            if attempt == attempts - 1:
                raise Busy("the database stayed locked by another process; retry shortly") from None
            time.sleep(delay + random.random() * delay)
            delay = min(delay * 2, 0.5)
    raise AssertionError("unreachable")


class Database:
    """Per-thread connections to one SQLite file."""

    def __init__(self, path: Path | str, *, journal_mode: str = "wal", busy_timeout_ms: int = 10_000) -> None:
        self.path = Path(path)
        self.journal_mode = journal_mode
        self.busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._all: list[Connection] = []
        self._lock = threading.Lock()
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)

    @property
    def conn(self) -> Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = Connection(self.path, journal_mode=self.journal_mode, busy_timeout_ms=self.busy_timeout_ms)
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Connection]:
        conn = self.conn
        _retry_busy(lambda: conn.raw.execute("BEGIN IMMEDIATE"))
        conn.in_tx = "write"
        try:
            yield conn
        except BaseException:
            conn.in_tx = None
            conn.raw.execute("ROLLBACK")
            raise
        conn.in_tx = None
        try:
            _retry_busy(lambda: conn.raw.execute("COMMIT"))
        except BaseException:
            if not conn.raw.getautocommit():
                conn.raw.execute("ROLLBACK")
            raise

    def write(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn` in one `BEGIN IMMEDIATE` transaction; retried as a whole if the lock is busy."""
        conn = self.conn
        if conn.in_tx == "write":  # nested writes join the outer transaction
            return fn(conn)
        if conn.in_tx == "read":
            raise RuntimeError("write() inside read(): start the outer transaction with write()")
        delay = 0.005
        for attempt in range(8):
            try:
                with self._tx() as c:
                    return fn(c)
            except _BUSY_ERRORS:
                if attempt == 7:
                    raise Busy("the database stayed locked by another process; retry shortly") from None
                time.sleep(delay + random.random() * delay)
                delay = min(delay * 2, 0.5)
        raise AssertionError("unreachable")

    def read(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn` in one read transaction, so it sees a single consistent snapshot."""
        conn = self.conn
        if conn.in_tx:
            return fn(conn)
        _retry_busy(lambda: conn.raw.execute("BEGIN DEFERRED"))
        conn.in_tx = "read"
        try:
            return fn(conn)
        finally:
            conn.in_tx = None
            conn.raw.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                with contextlib.suppress(Exception):
                    conn.close()
            self._all.clear()
        self._local = threading.local()


def dumps(value: Any) -> str | None:
    """JSON for a TEXT column (arrays and objects); None stays NULL."""
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def loads(value: str | None) -> Any:
    return None if value is None else json.loads(value)
