"""One daemon thread per server process running background jobs every `VP_TICK_SECONDS`.

Domains add jobs with `app.add_job(name, fn)`. Each job runs under a lease in the database, so
when several processes share the file one of them does a given job per tick instead of all.
A job's failure is logged and retried on the next tick; it never stops the thread.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid

from .db import Connection
from .ids import now_ms

log = logging.getLogger("vantage_peers.scheduler")
WAKE_DEBOUNCE_SECONDS = 0.2


def try_lease(conn: Connection, name: str, owner: str, ttl_ms: int) -> bool:
    """Take or renew the lease `name` for `owner`; decided in one statement."""
    now = now_ms()
    conn.execute(
        "INSERT INTO leases (name, owner, expiresAt) VALUES (?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expiresAt = excluded.expiresAt "
        "WHERE leases.owner = excluded.owner OR leases.expiresAt <= ?",
        (name, owner, now + ttl_ms, now),
    )
    return conn.scalar("SELECT owner FROM leases WHERE name = ?", (name,)) == owner


def release_lease(conn: Connection, name: str, owner: str) -> None:
    conn.execute("DELETE FROM leases WHERE name = ? AND owner = ?", (name, owner))


class Scheduler:
    def __init__(self, app) -> None:
        self.app = app
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._wanted: set[str] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def wake(self, job: str) -> None:
        """Run `job` soon instead of at the next tick (e.g. embed a memory just written)."""
        with self._lock:
            self._wanted.add(job)
        self._wake.set()

    def start(self) -> None:
        self.app.scheduler = self
        self._thread = threading.Thread(target=self._loop, name="vantage-peers-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def run_once(self, only: set[str] | None = None) -> dict[str, object]:
        """Run every job (or those in `only`) whose lease this process gets; returns each result or error."""
        results: dict[str, object] = {}
        ttl = int(max(self.app.settings.tick_seconds * 4, 60) * 1000)
        for name, fn in list(self.app.jobs):
            if only is not None and name not in only:
                continue
            lease = f"job:{name}"
            if not self.app.db.write(lambda c, lease=lease: try_lease(c, lease, self.owner, ttl)):
                continue
            try:
                results[name] = fn()
            except Exception as exc:  # noqa: BLE001 - one failing job must not stop the others
                log.exception("background job %s failed", name)
                results[name] = exc
            finally:
                self.app.db.write(lambda c, lease=lease: release_lease(c, lease, self.owner))
        return results

    def _loop(self) -> None:
        only: set[str] | None = None
        while not self._stop.is_set():
            try:
                self.run_once(only)
            except Exception:  # noqa: BLE001
                log.exception("scheduler tick failed")
            woken = self._wake.wait(self.app.settings.tick_seconds)
            if self._stop.is_set():
                break
            if woken:
                self._stop.wait(WAKE_DEBOUNCE_SECONDS)  # let a burst of writes land in one batch
            with self._lock:
                self._wake.clear()
                only = set(self._wanted) if woken else None
                self._wanted.clear()
