"""apsw connections: one per thread (closed when the thread ends), pragmas, sqlite-vec, transactions.

Several server processes share one file. Every mutation runs in one short `BEGIN IMMEDIATE`
transaction (the write lock is taken up front, so two writers never deadlock upgrading a read
lock). Lock contention is handled here and only here (see `busy.py`): reads, writes and PRAGMAs
are retried with jittered backoff inside one wait budget per call (`VP_BUSY_TIMEOUT_MS`), after
which the agent gets `BUSY: … retry`, never minutes of silence.

The journal mode belongs to the file: the process that creates it sets `VP_JOURNAL_MODE`, later
processes adopt whatever the file uses (see `journal.py`).

Why one file over 400 lines: the per-thread connection, its transaction, the busy retry and the
file guard check wrap each other around every statement; they are kept together so the order of
those wrappers is visible in one place.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import apsw

from ..core.inline import note_commit, running
from . import busy, journal
from .busy import BUSY_ERRORS, CallScope, current_scope
from .faults import StorageIO, StorageReadOnly
from .fileguard import DbFileGone, FileGuard, describe_change, identity, stale_holders, valid_replacement
from .statements import RawStatements

T = TypeVar("T")
Row = dict[str, Any]

JOURNAL_SIZE_LIMIT = 4 * 1024 * 1024  # the WAL / journal file is truncated back to this after a checkpoint


def _vec_path() -> str:
    """sqlite-vec's loadable extension, found without importing the package: its __init__ imports
    numpy when numpy is installed (~180 ms on the MCP handshake's path, for a path join)."""
    import importlib.util
    import os

    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("sqlite-vec is not installed")
    return os.path.join(next(iter(spec.submodule_search_locations)), "vec0")


def _load_vec(conn: apsw.Connection) -> str | None:
    """Load sqlite-vec; returns its version, or None when the extension is unavailable."""
    try:
        conn.enable_load_extension(True)
        conn.load_extension(_vec_path())
        conn.enable_load_extension(False)
        return conn.execute("SELECT vec_version()").fetchall()[0][0]
    except Exception:  # noqa: BLE001 - a missing extension degrades vector search, nothing else
        return None


MMAP_BYTES = 1 << 30


class Connection(RawStatements):
    """A thin wrapper over one apsw connection with dict rows (db/postgres.py has the same methods)."""

    backend = "sqlite"

    def __init__(self, path: Path | str, *, journal_mode: str = "wal", busy_timeout_ms: int = 5_000,
                 create: bool = True, generation: int = 0) -> None:
        # Only a Database's first connection may create the file: a later one finding no file means
        # it was deleted under us (fileguard.py), and a fresh empty file there would hide that.
        flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
        try:
            self.raw = apsw.Connection(str(path), flags=flags)
        except apsw.CantOpenError:
            if create or Path(path).exists():
                raise
            raise DbFileGone(f"the database file {path} was deleted or moved while this server was running; "
                             "restart the server") from None
        self.generation = generation  # the FileGuard generation this connection belongs to
        self.path = str(path)
        self.journal_mode = ""  # set below; close() reads it
        self.busy_timeout_ms = busy_timeout_ms
        self.raw.set_busy_timeout(busy_timeout_ms)
        self.closed = False
        try:
            self.vec_version = _load_vec(self.raw)
            # PRAGMAs can meet a lock too (journal_mode reads the schema): one budget for all of them.
            scope = CallScope(busy_timeout_ms)
            self.journal_mode = busy.retry(lambda: journal.apply(self.raw, journal_mode), scope)
            sync = "NORMAL" if self.journal_mode == "wal" else "FULL"  # rollback journals need FULL to be safe
            for pragma in ("foreign_keys=ON", f"synchronous={sync}", "temp_store=MEMORY",
                           f"journal_size_limit={JOURNAL_SIZE_LIMIT}"):
                busy.retry(lambda p=pragma: self.raw.execute(f"PRAGMA {p}").fetchall(), scope)
            if self.journal_mode == "wal":
                # Memory-mapped reads: vec0's KNN scans its vector chunks through the page cache without
                # a copy per page (benchmarks/search.py: namespaced hybrid_search at 100k -36%). WAL
                # means a local disk (network drives run VP_JOURNAL_MODE=delete), where mmap is safe;
                # the mapping is shared between processes, not private memory.
                busy.retry(lambda: self.raw.execute(f"PRAGMA mmap_size={MMAP_BYTES}").fetchall(), scope)
        except BaseException:
            self.close()
            raise
        self.in_tx: str | None = None  # "read" or "write" while a transaction is open
        # SQLite falls back to a read-only open when the file cannot be written (chattr +i, chmod):
        # such a connection stays read-only after the file is writable again, so Database.conn
        # replaces it then (tests/db/test_faults_storage.py).
        self.opened_read_only = bool(self.raw.readonly("main"))

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Row]:
        cur = self.raw.cursor()
        cur.execute(sql, params)
        try:
            names = [d[0] for d in cur.get_description()]
        except apsw.ExecutionCompleteError:
            return []
        return [dict(zip(names, row, strict=True)) for row in cur]

    def iterate(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Iterator[Row]:
        """Rows one at a time, so a caller can stop reading (e.g. at a byte budget) without loading all."""
        cur = self.raw.cursor()
        cur.execute(sql, params)
        try:
            names = [d[0] for d in cur.get_description()]
        except apsw.ExecutionCompleteError:
            return
        for row in cur:
            yield dict(zip(names, row, strict=True))

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

    def rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        """Plain tuples, for hot loops that need no column names."""
        return [tuple(row) for row in self.raw.execute(sql, params)]

    def iterate_rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Iterator[tuple[Any, ...]]:
        """`rows` one at a time (a caller may stop early, as with `iterate`)."""
        return self.raw.execute(sql, params)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(Exception):
                if self.journal_mode == "wal" and not os.access(f"{self.path}-shm", os.W_OK):
                    # A checkpoint on close writes the mapped -shm: read-only now, that is a SIGBUS (#19).
                    self.raw.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
            with contextlib.suppress(Exception):
                self.raw.close()


class _Holder:
    """Lives only in the thread-local slot: when its thread ends, it is freed and its finalizer closes the connection."""

    __slots__ = ("conn", "__weakref__")

    def __init__(self, conn: Connection) -> None:
        self.conn = conn


class Database:
    """Per-thread connections to one SQLite file, closed when their thread ends."""

    backend = "sqlite"
    runs_inline = True  # a quick call may run on the event loop (core/inline.py): a local file

    def __init__(self, path: Path | str, *, journal_mode: str = "wal", busy_timeout_ms: int = 5_000,
                 search_budget_ms: int = 2_000) -> None:
        self.path = Path(path)
        self.search_budget_ms = search_budget_ms
        self.requested_journal_mode = journal_mode
        self.busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._open: list[tuple[weakref.ref[threading.Thread], Connection]] = []
        self._lock = threading.Lock()
        self.journal_warning: str | None = None
        self.guard: FileGuard | None = None
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():  # about to create it: say so if a running server holds a deleted one
                for pid, what in stale_holders(self.path):
                    _note(f"vantage-peers: WARNING: creating a new empty {self.path} while process {pid} holds "
                          f"{what}; stop that server only after copying it if its data matters")
            shm = Path(f"{self.path}-shm")
            if shm.exists() and not os.access(shm, os.W_OK):  # opening would map it: SIGBUS on first write
                raise StorageReadOnly(f"{shm} (the WAL index of {self.path}) is not writable (chattr +i, chmod or a "
                                      "read-only filesystem); make it writable again (chattr -i / chmod u+w)")
            # Decide (and warn about) the file's journal mode once, on this thread's first connection.
            self.journal_mode = self.conn.journal_mode
            self.guard = FileGuard(self.path)  # from now on: is the path still our file? (fileguard.py)
            self.journal_warning = journal.mismatch_warning(journal_mode, self.journal_mode, self.path)
            if self.journal_warning:
                journal.warn(self.journal_warning)
        else:
            self.journal_mode = "memory"

    @property
    def conn(self) -> Connection:
        holder = getattr(self._local, "holder", None)
        guard = self.guard
        if holder is not None and not holder.conn.closed:
            current = guard is None or holder.conn.generation == guard.generation
            if holder.conn.in_tx or (current and not self._writable_again(holder.conn)):
                return holder.conn
            # The file was replaced by a valid one and reopened, or is writable again after this
            # connection was opened read-only: this thread follows with a fresh connection.
            holder.conn.close()
        self._sweep()
        if guard is not None:
            self._fresh_conn_check(guard)  # never open (and so read the old WAL into) a file that replaced ours
        conn = Connection(self.path, journal_mode=self.requested_journal_mode, busy_timeout_ms=self.busy_timeout_ms,
                          create=guard is None, generation=guard.generation if guard else 0)
        if guard is not None and identity(self.path) != guard.opened:
            conn.close()
            self._fresh_conn_check(guard)
        holder = _Holder(conn)
        weakref.finalize(holder, conn.close)
        self._local.holder = holder
        with self._lock:
            self._open.append((weakref.ref(threading.current_thread()), conn))
        return conn

    def _writable_again(self, conn: Connection) -> bool:
        return conn.opened_read_only and os.access(self.path, os.W_OK)

    def _sweep(self) -> None:
        """Close connections whose thread has ended (the finalizer usually did already)."""
        with self._lock:
            alive = []
            for ref, conn in self._open:
                thread = ref()
                if conn.closed:
                    continue
                if thread is None or not thread.is_alive():
                    conn.close()
                else:
                    alive.append((ref, conn))
            self._open = alive

    def open_connections(self) -> int:
        """How many connections this Database holds open (after closing those of ended threads)."""
        self._sweep()
        with self._lock:
            return len(self._open)

    def _no_checkpoint_on_close(self) -> None:
        """The WAL index cannot be written: closing a connection must not checkpoint (that writes the
        mapped -shm, SIGBUS). The WAL stays on disk and the next process to open the file replays it."""
        with self._lock:
            conns = [conn for _, conn in self._open if not conn.closed]
        for conn in conns:
            with contextlib.suppress(Exception):
                conn.raw.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)

    def _fresh_conn_check(self, guard: FileGuard) -> None:
        """A thread with no connection yet finds the path changed: it has no handle on the old file to
        empty its WAL through, so it cannot safely follow a replacement — the file is gone for good."""
        if guard.gone:
            raise guard.gone_error()
        current = identity(self.path)
        if current != guard.opened:
            with guard._lock:
                if guard.gone is None and identity(self.path) != guard.opened:
                    guard.gone = describe_change(self.path, current)
                    _note(f"vantage-peers: DB_FILE_GONE: {guard.gone}; writes are refused until the server "
                          "is restarted")
            if guard.gone:
                raise guard.gone_error()
        self._check_shm(guard)  # a new connection maps -shm right away

    def _checked_conn(self, *, force: bool) -> Connection:
        """This thread's connection, after making sure the path still names the file we write to."""
        guard = self.guard
        if guard is None:
            return self.conn
        if guard.gone:
            raise guard.gone_error()
        current = guard.changed(force=force)
        if current is not False:
            with guard._lock:
                if guard.gone:
                    raise guard.gone_error()
                try:
                    expected = int(self.conn.scalar("PRAGMA user_version"))  # read from the file we had open
                except apsw.Error:
                    expected = -1
                # The old WAL first: left at the path it would be read as part of the new file.
                if current is not None and self._wal_emptied() and valid_replacement(self.path, expected):
                    guard.opened, guard.generation = current, guard.generation + 1
                    _note(f"vantage-peers: {self.path} was replaced by another database of this schema "
                          f"(version {expected}); reopened it — writes go to the new file from now on")
                else:
                    guard.gone = describe_change(self.path, current)
                    _note(f"vantage-peers: DB_FILE_GONE: {guard.gone}; writes are refused until the server "
                          "is restarted")
                    raise guard.gone_error()
        self._check_shm(guard, force=False)  # access() every time; the -shm identity every few hundred ms
        return self.conn

    def _check_shm(self, guard: FileGuard, *, force: bool = True) -> None:
        """Before SQLite touches the -shm mapping: a write to it once it is read-only is a SIGBUS."""
        if self.journal_mode != "wal":
            return
        problem = guard.shm_problem(force=force)
        if problem is not None:
            kind, message = problem
            self._no_checkpoint_on_close()
            raise StorageReadOnly(message) if kind == "read-only" else StorageIO(message)

    def _wal_emptied(self) -> bool:
        """Before following a replaced file: empty the old file's WAL (a WAL left at the path would be
        replayed onto the new file — a mispaired journal corrupts it). False when it cannot be emptied."""
        if self.journal_mode != "wal":
            return True
        try:
            log_frames, _ = self.conn.raw.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_TRUNCATE)
        except apsw.Error:
            return False
        return log_frames == 0

    def _after_commit(self) -> None:
        """A write committed into a file that stopped being the path's during it may be lost: say so."""
        guard = self.guard
        if guard is not None and guard.changed(force=True) is not False:
            raise DbFileGone(f"the database file {self.path} changed while this write ran; it may not have been "
                             "saved — call again (and restart the server if DB_FILE_GONE persists)")

    def inline(self) -> contextlib.AbstractContextManager[None]:
        """A quick call on the event loop: a locked file raises WouldWait instead of waiting."""
        return running()

    @contextlib.contextmanager
    def call_scope(self, busy_ms: int | None = None) -> Iterator[CallScope]:
        """One tool call: a single busy-wait budget (and search time budget) for all its transactions."""
        budget = self.busy_timeout_ms if busy_ms is None else busy_ms
        with busy.call_scope(budget, self.search_budget_ms) as scope:
            yield scope

    @contextlib.contextmanager
    def _tx(self, conn: Connection, scope: CallScope) -> Iterator[Connection]:
        busy.retry(lambda: conn.raw.execute("BEGIN IMMEDIATE"), scope, conn)
        conn.in_tx = "write"
        try:
            yield conn
        except BaseException:
            conn.in_tx = None
            with contextlib.suppress(apsw.Error):
                conn.raw.execute("ROLLBACK")
            raise
        conn.in_tx = None
        try:
            busy.retry(lambda: conn.raw.execute("COMMIT"), scope, conn)
        except BaseException:
            if not conn.raw.getautocommit():
                with contextlib.suppress(apsw.Error):
                    conn.raw.execute("ROLLBACK")
            raise

    def write(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn` in one `BEGIN IMMEDIATE` transaction; retried as a whole while the lock is busy."""
        conn = self.conn
        if conn.in_tx == "write":  # nested writes join the outer transaction
            return fn(conn)
        if conn.in_tx == "read":
            raise RuntimeError("write() inside read(): start the outer transaction with write()")
        conn = self._checked_conn(force=True)  # every write: never into a deleted or replaced file
        with busy.call_scope(self.busy_timeout_ms, self.search_budget_ms) as scope:
            def attempt() -> T:
                with self._tx(conn, scope) as c:
                    return fn(c)

            result = busy.retry(attempt, scope, conn)
            scope.committed = True
            note_commit()
        self._after_commit()
        return result

    def read(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn` in one read transaction (a single consistent snapshot); retried while the file is locked."""
        conn = self.conn
        if conn.in_tx:
            return fn(conn)
        conn = self._checked_conn(force=False)  # reads: at most every few hundred ms (fileguard.py)
        with busy.call_scope(self.busy_timeout_ms, self.search_budget_ms) as scope:
            def attempt() -> T:
                conn.raw.execute("BEGIN DEFERRED")
                conn.in_tx = "read"
                try:
                    return fn(conn)
                finally:
                    conn.in_tx = None
                    # A read transaction has nothing to lose: ROLLBACK cannot meet BUSY like COMMIT can.
                    with contextlib.suppress(apsw.Error):
                        conn.raw.execute("ROLLBACK")

            return busy.retry(attempt, scope, conn)

    def watcher(self, *, interval: float = 0.2):
        """A `watch.Watcher`: has any process committed since the last look?"""
        from .watch import Watcher

        return Watcher(str(self.path), interval=interval)

    def close(self) -> None:
        if self.guard is not None and self.journal_mode == "wal" and self.guard.shm_problem() is not None:
            self._no_checkpoint_on_close()  # closing would checkpoint through a read-only -shm: SIGBUS
        with self._lock:
            for _, conn in self._open:
                conn.close()
            self._open.clear()
        self._local = threading.local()


def _note(line: str) -> None:
    """One line on stderr; never raises (stderr may sit on the full or vanished disk)."""
    import sys

    with contextlib.suppress(Exception):
        print(line, file=sys.stderr, flush=True)


__all__ = ["BUSY_ERRORS", "Connection", "Database", "Row", "current_scope", "dumps", "loads"]


def dumps(value: Any) -> str | None:
    """JSON for a TEXT column (arrays and objects); None stays NULL."""
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def loads(value: str | None) -> Any:
    return None if value is None else json.loads(value)
