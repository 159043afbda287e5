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
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="vantage-peers-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def run_once(self) -> dict[str, object]:
        """Run every job whose lease this process gets; returns each job's result (or error)."""
        results: dict[str, object] = {}
        ttl = int(max(self.app.settings.tick_seconds * 4, 60) * 1000)
        for name, fn in list(self.app.jobs):
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
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception:  # noqa: BLE001
                log.exception("scheduler tick failed")
            self._stop.wait(self.app.settings.tick_seconds)
