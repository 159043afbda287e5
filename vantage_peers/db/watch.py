"""Wake on a change to the database file made by any connection in any process.

`PRAGMA data_version` on one dedicated connection changes whenever another connection commits to
the file (SQLite documents it for exactly this). Reading it is a few microseconds, so `wait()`
polls it at `interval` instead of querying application tables: the dashboard's live stream,
`vantage-peers wait` and hooks learn *that* something changed, then query what they show.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import apsw


class Watcher:
    """`changed()` is True when any connection committed since the previous call (or since creation)."""

    def __init__(self, path: str, *, interval: float = 0.2) -> None:
        self.path = str(Path(path))
        self.interval = interval
        self._lock = threading.Lock()
        # A plain connection: no extension, no schema access, no write; it only reads the counter.
        self._conn: apsw.Connection | None = apsw.Connection(self.path, flags=apsw.SQLITE_OPEN_READWRITE)
        self._conn.set_busy_timeout(1_000)
        self._last = self._version()
        # data_version does not move for this connection's own commits, and it never commits:
        # every change it reports comes from another connection.

    def _version(self) -> tuple[int, int]:
        assert self._conn is not None, "Watcher is closed"
        data = self._conn.execute("PRAGMA data_version").fetchall()[0][0]
        # On a fresh file that is written by a connection opened later, data_version can stay put
        # until the first read of the schema; the schema cookie covers DDL on top of it.
        schema = self._conn.execute("PRAGMA schema_version").fetchall()[0][0]
        return int(data), int(schema)

    def changed(self) -> bool:
        """Non-blocking: True if any other connection committed since the last call."""
        with self._lock:
            now = self._version()
            if now != self._last:
                self._last = now
                return True
            return False

    def wait(self, timeout: float | None) -> bool:
        """Block until a change (True) or `timeout` seconds pass (False); None waits forever."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.changed():
                return True
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                time.sleep(min(self.interval, left))
            else:
                time.sleep(self.interval)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
