"""The database file under a running server: deleted, replaced or moved.

An open SQLite connection keeps working on its inode after the path is unlinked or renamed: every
write is acknowledged into a file nobody will read again (issue #19: 5 of 5 acknowledged messages
lost). `FileGuard` remembers the (st_dev, st_ino) of the file it opened and compares it with the
path's: on every write transaction (before it starts and after it commits) and at most every
`interval` seconds on reads. When they differ:

- the path holds a valid database of our schema (same `user_version`): the Database reopens it
  (new connections, one line on stderr) — e.g. a backup restored by a sync client;
- otherwise (missing, not a database, another schema): `DB_FILE_GONE`, on every call until the
  server is restarted. Nothing is ever written to the old inode again, and no connection of this
  process creates a fresh file at the path (later connections open without SQLITE_OPEN_CREATE).

`stale_holders(path)` (Linux /proc) lists other processes that hold the file open while the path
names another file or none: `doctor` and `status` report them.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from ..core.errors import VantageError

CHECK_INTERVAL_SECONDS = 0.3


class DbFileGone(VantageError):
    code = "DB_FILE_GONE"


def identity(path: Path | str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def describe_change(path: Path, now: tuple[int, int] | None) -> str:
    if now is None:
        return f"the database file {path} was deleted or moved while this server was running"
    return f"the database file {path} was replaced by another file while this server was running"


class FileGuard:
    """Whether the path still names the file this process opened (see the module docstring)."""

    def __init__(self, path: Path, interval: float = CHECK_INTERVAL_SECONDS) -> None:
        self.path = path
        self.interval = interval
        self.opened = identity(path)
        self.generation = 0  # bumped on every reopen: connections of an older generation are replaced
        self.gone: str | None = None  # set once the file is gone for good (until restart)
        self._checked_at = time.monotonic()
        self._lock = threading.Lock()
        self.shm_path = Path(f"{path}-shm")
        self.shm_opened: tuple[int, int] | None = None  # recorded on the first check that finds it
        self._shm_checked_at = 0.0

    def shm_problem(self, *, force: bool = True) -> tuple[str, str] | None:
        """('read-only' | 'vanished', message) when the WAL index cannot be used safely, else None.

        SQLite maps `-shm` shared and writes to it on every transaction, reads included: once the
        file is immutable (chattr +i) or on a read-only remount, the first write to a mapped page
        kills the process with SIGBUS. Refusing before SQLite touches it keeps the process alive.
        A -shm deleted or replaced while we run would let another process build a second WAL index
        for the same file (corruption): refused too. One access() per transaction, plus one stat()
        on writes (`force`) and at most every `interval` on reads."""
        shm = self.shm_path
        if os.access(shm, os.W_OK):
            now = time.monotonic()
            if not force and self.shm_opened is not None and now - self._shm_checked_at < self.interval:
                return None
            self._shm_checked_at = now
            current = identity(shm)
            if self.shm_opened is None:
                self.shm_opened = current
            if current == self.shm_opened:
                return None
            return "vanished", (f"{shm} (the WAL index) was deleted or replaced while this server was running; "
                                "restart the server")
        if shm.exists():
            return "read-only", (f"{shm} (the WAL index) is not writable (chattr +i, chmod or a read-only "
                                 "filesystem); make it writable again (chattr -i / chmod u+w / remount rw)")
        if self.shm_opened is None:
            return None  # not created yet: SQLite creates it on first use
        return "vanished", (f"{shm} (the WAL index) was deleted while this server was running; restart the server")

    def changed(self, *, force: bool) -> tuple[int, int] | None | bool:
        """False when unchanged (or not checked: throttled); else the path's identity now (None: no file)."""
        if self.opened is None:
            return False
        now = time.monotonic()
        if not force and now - self._checked_at < self.interval:
            return False
        self._checked_at = now
        current = identity(self.path)
        return False if current == self.opened else current

    def gone_error(self) -> DbFileGone:
        return DbFileGone(f"{self.gone}; nothing can be saved until the server is restarted — restart the "
                          "server (writes are refused so that none is acknowledged into a file nobody reads)")

    def adopt(self, current: tuple[int, int]) -> None:
        """The path's new file is ours to use from now on."""
        with self._lock:
            self.opened = current
            self.generation += 1


def valid_replacement(path: Path, expected_version: int) -> bool:
    """True when `path` is an SQLite database whose schema version is `expected_version`."""
    import apsw

    if expected_version < 1:
        return False
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return False
    try:
        version = conn.execute("PRAGMA user_version").fetchall()[0][0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return version == expected_version and {"meta", "messages"} <= tables
    except apsw.Error:
        return False
    finally:
        conn.close()


def stale_holders(path: Path | str) -> list[tuple[int, str]]:
    """(pid, what) for each other process holding `path` open as a file the path no longer names.
    `what` names the /proc descriptor the old file can still be copied from while that process runs."""
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    path = Path(path).absolute()
    target = str(path)
    current = identity(path)
    found: dict[int, str] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            fds = list((entry / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(fd)
            except OSError:
                continue
            if link not in (target, target + " (deleted)"):
                continue
            held = identity(fd)
            if held is not None and held != current:
                kind = "a deleted copy" if link.endswith(" (deleted)") or current is None else "a replaced copy"
                found[int(entry.name)] = f"{kind} (its data can still be copied from {fd})"
                break
    return sorted(found.items())
