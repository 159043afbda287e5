"""Has anyone committed to the database file? Cheap enough to ask a few times a second, forever.

`PRAGMA data_version` on one dedicated connection changes whenever *another* connection commits
to the file (any process). Reading it touches no table and no lock beyond a shared read of the
header, so an idle watcher costs a few syscalls per poll; callers query their data only when
`changed()` says so. Used by `vantage-peers wait`, the plugin hooks, MCP resource subscriptions
and the dashboard's live stream (DESIGN.md "Delivery").

A commit made through the watcher's own connection is not seen (SQLite reports only other
connections' commits), which is why the watcher owns a connection nobody else writes through.
"""

from __future__ import annotations

import threading
import time

import apsw


class PollingWatcher:
    """`wait` on top of a `_poll(pause)` that says whether anyone committed within `pause` seconds."""

    interval: float
    _closed: threading.Event

    def _poll(self, pause: float) -> bool:
        raise NotImplementedError

    def wait(self, timeout: float | None) -> bool:
        """Block until a change (True) or `timeout` seconds pass (False); None waits until close()."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while not self._closed.is_set():
            pause = self.interval if deadline is None else max(0.0, min(self.interval, deadline - time.monotonic()))
            if self._poll(pause):  # looked at least once, even with timeout 0
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
        return False

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()  # type: ignore[attr-defined]


class Watcher(PollingWatcher):
    def __init__(self, path: str, *, interval: float = 0.2) -> None:
        self.path = str(path)
        self.interval = interval
        # Opened read-write (a read-only WAL reader cannot recreate a missing -shm) but never written
        # through, and never created: watching a path that holds no database is an error, not a new file.
        self._conn = apsw.Connection(self.path, flags=apsw.SQLITE_OPEN_READWRITE)
        self._conn.set_busy_timeout(1_000)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._last = self._version()

    def _version(self) -> int:
        """data_version, or the previous value when the file is momentarily locked (e.g. a checkpoint)."""
        try:
            return int(self._conn.execute("PRAGMA data_version").fetchall()[0][0])
        except apsw.BusyError:
            return getattr(self, "_last", 0)

    def changed(self) -> bool:
        """Non-blocking: has any other connection committed to the file since the last call?"""
        with self._lock:
            if self._closed.is_set():
                return False
            now = self._version()
            if now != self._last:
                self._last = now
                return True
            return False

    def _poll(self, pause: float) -> bool:
        if self.changed():
            return True
        self._closed.wait(pause)
        return False

    def close(self) -> None:
        with self._lock:
            if not self._closed.is_set():
                self._closed.set()
                self._conn.close()
