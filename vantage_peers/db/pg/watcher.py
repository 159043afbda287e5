"""`db.watch.Watcher` on PostgreSQL: LISTEN on the channel every write transaction notifies
(db/postgres.py `_WRITE_END`)."""

from __future__ import annotations

import contextlib
import threading

import psycopg

from ..postgres import NOTIFY_CHANNEL, _need_driver
from ..watch import PollingWatcher


class PgWatcher(PollingWatcher):
    """`db.watch.Watcher` on PostgreSQL: LISTEN on the channel every write transaction notifies."""

    def __init__(self, url: str, *, interval: float = 0.2) -> None:
        _need_driver()
        self.interval = interval
        self._conn = psycopg.connect(url, autocommit=True)
        self._conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
        self._lock = threading.Lock()
        self._closed = threading.Event()

    def _drain(self, timeout: float) -> bool:
        got = False
        for _ in self._conn.notifies(timeout=timeout, stop_after=1):
            got = True
        if got:  # more may be queued: one change is enough, empty the queue
            for _ in self._conn.notifies(timeout=0):
                pass
        return got

    def changed(self) -> bool:
        return self._poll(0)

    def _poll(self, pause: float) -> bool:
        """Block on the connection's socket for up to `pause`: a notice wakes it at once."""
        with self._lock:
            if self._closed.is_set():
                return False
            return self._drain(pause)

    def close(self) -> None:
        with self._lock:
            if not self._closed.is_set():
                self._closed.set()
                with contextlib.suppress(Exception):
                    self._conn.close()
