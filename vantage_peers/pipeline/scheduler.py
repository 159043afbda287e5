"""One daemon thread per server process running background jobs every `VP_TICK_SECONDS`.

Domains add jobs with `app.add_job(name, fn, every_seconds=None, cron=None)`:
- no cadence: the job may run on every tick (embedding queue, TTL expiry, recurring tasks);
- `every_seconds=3600`: at most once an hour across *all* processes sharing the file;
- `cron="0 6 * * *"` (UTC): once per occurrence across all processes.

Each job runs under a lease in the database, taken only if the job is due (one SQL statement),
so when several processes share the file one of them runs a given job (except the every-tick
jobs declared with `App.allow_concurrent`, whose effects are decided in SQL). The cadence lives in
`schedulerJobs.nextRunAt`, advanced only after a run succeeds: a job that raises is logged,
recorded (`lastStatus='error'`) and retried on the next tick by whichever process gets there;
it never stops the thread. A process killed mid-job leaves its lease to expire, then another
process runs the job. A job never run before is due at once. The clock is injectable (tests).
"""

from __future__ import annotations

import contextvars
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from ..core.ids import now_ms
from ..db import Connection

log = logging.getLogger("vantage_peers.pipeline.scheduler")
WAKE_DEBOUNCE_SECONDS = 0.2
SCHEDULED_LEASE_MS = 300_000  # a job with a cadence may run this long before another process may take over
_tick_time: contextvars.ContextVar[int | None] = contextvars.ContextVar("vp_tick_time", default=None)
def tick_now() -> int:
    """Now in Unix ms as the running scheduler tick sees it (its injected clock), else the wall clock."""
    value = _tick_time.get()
    return value if value is not None else now_ms()


def try_lease(conn: Connection, name: str, owner: str, ttl_ms: int, now: int | None = None) -> bool:
    """Take or renew the lease `name` for `owner`; decided in one statement."""
    now = now if now is not None else now_ms()
    conn.execute(
        "INSERT INTO leases (name, owner, expiresAt) VALUES (?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expiresAt = excluded.expiresAt "
        "WHERE leases.owner = excluded.owner OR leases.expiresAt <= ?",
        (name, owner, now + ttl_ms, now),
    )
    return conn.scalar("SELECT owner FROM leases WHERE name = ?", (name,)) == owner


def release_lease(conn: Connection, name: str, owner: str) -> None:
    conn.execute("DELETE FROM leases WHERE name = ? AND owner = ?", (name, owner))


def schedule_text(cadence: dict[str, Any] | None) -> str:
    if not cadence or (cadence.get("every_seconds") is None and cadence.get("cron") is None):
        return "every tick"
    if cadence.get("cron") is not None:
        return f"cron {' '.join(str(cadence['cron']).split())}"
    return f"every {float(cadence['every_seconds']):g}s"


def next_run_after(schedule: str, started: int) -> int:
    """When a job with `schedule` is next due after a successful run that started at `started`."""
    if schedule.startswith("cron "):
        from ..core import cron

        return cron.next_after(cron.schedule(schedule[5:], "UTC"), started)
    if schedule.startswith("every ") and schedule != "every tick":
        return started + int(float(schedule[6:-1]) * 1000)
    return 0  # every tick: always due


def claim_job(conn: Connection, *, name: str, schedule: str, owner: str, now: int, ttl_ms: int,
              force: bool = False) -> bool:
    """Take the job's lease if the job is due (or `force`); one conditional statement decides."""
    # A new job is due at once; a job whose cadence changed (a new release) is due at once too.
    conn.execute(
        "INSERT INTO schedulerJobs (name, schedule, nextRunAt) VALUES (?, ?, 0) "
        "ON CONFLICT (name) DO UPDATE SET schedule = excluded.schedule, nextRunAt = 0 "
        "WHERE schedulerJobs.schedule != excluded.schedule",
        (name, schedule),
    )
    lease = f"job:{name}"
    taken = conn.one(
        "INSERT INTO leases (name, owner, expiresAt) "
        "SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM schedulerJobs WHERE name = ?4 AND (?5 = 1 OR nextRunAt <= ?6)) "
        "ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expiresAt = excluded.expiresAt "
        "WHERE leases.owner = excluded.owner OR leases.expiresAt <= ?6 RETURNING owner",
        (lease, owner, now + ttl_ms, name, 1 if force else 0, now),
    )
    if taken is None:
        return False
    conn.execute("UPDATE schedulerJobs SET lastStartedAt = ?, lastOwner = ? WHERE name = ?", (now, owner, name))
    return True


def finish_job(conn: Connection, *, name: str, schedule: str, owner: str, started: int, finished: int,
               error: BaseException | None, retry_ms: int = 0) -> None:
    """Record the run, release the lease; the cadence advances only after a success.

    A failed cadenced job is due again `retry_ms` (one tick) after it started, for any process, so N
    processes retry it once per tick between them, not once each."""
    release_lease(conn, f"job:{name}", owner)
    conn.execute("INSERT INTO schedulerJobs (name, schedule, lastStartedAt, lastOwner) VALUES (?, ?, ?, ?) "
                 "ON CONFLICT (name) DO UPDATE SET schedule = excluded.schedule, "
                 "lastStartedAt = excluded.lastStartedAt, lastOwner = excluded.lastOwner",
                 (name, schedule, started, owner))
    if error is None:
        conn.execute(
            "UPDATE schedulerJobs SET lastFinishedAt = ?, lastDurationMs = ?, lastStatus = 'ok', lastError = NULL, "
            "runCount = runCount + 1, nextRunAt = ? WHERE name = ?",
            (finished, finished - started, next_run_after(schedule, started), name),
        )
    else:
        conn.execute(
            "UPDATE schedulerJobs SET lastFinishedAt = ?, lastDurationMs = ?, lastStatus = 'error', lastError = ?, "
            "failCount = failCount + 1, nextRunAt = CASE WHEN schedule = 'every tick' THEN 0 ELSE ? END "
            "WHERE name = ?",
            (finished, finished - started, f"{type(error).__name__}: {error}"[:1000], started + retry_ms, name),
        )


class Scheduler:
    def __init__(self, app, *, clock: Callable[[], int] | None = None) -> None:
        self.app = app
        self.clock = clock or now_ms  # Unix ms; tests inject a fake clock
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

    def start(self, delay: float = 0.0) -> None:
        """Tick now and every tick_seconds; the first tick after `delay` seconds at most (a write's
        wake comes sooner), so that a starting server answers its client first."""
        self.app.scheduler = self
        self._thread = threading.Thread(target=self._loop, args=(min(delay, self.app.settings.tick_seconds),),
                                        name="vantage-peers-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def run_once(self, only: set[str] | None = None, *, force: bool = False) -> dict[str, object]:
        """Run every due job (or those in `only`) whose lease this process gets; returns each result or error.

        `force` runs the selected jobs even when their cadence says they are not due yet (wake).
        """
        results: dict[str, object] = {}
        complete = getattr(self.app, "complete_registration", None)
        if complete is not None:
            complete()  # jobs of domains a stdio server left out at start run all the same (deferred.py)
        tick_ms = int(self.app.settings.tick_seconds * 1000)
        tick_ttl = max(tick_ms * 4, 60_000)
        for name, fn in list(self.app.jobs):
            if only is not None and name not in only:
                continue
            try:
                schedule = schedule_text(self.app.job_schedules.get(name))
                next_run_after(schedule, 0)  # a malformed cadence is reported, not run
            except Exception as exc:  # noqa: BLE001
                log.error("background job %s has an invalid cadence: %s", name, exc)
                results[name] = exc
                continue
            ttl = tick_ttl if schedule == "every tick" else max(tick_ttl, SCHEDULED_LEASE_MS)
            started = self.clock()
            if schedule != "every tick" and not force and not self._maybe_due(name, schedule, started):
                continue  # a read, so that N idle processes do not queue on the write lock every tick
            concurrent = name in self.app.concurrent_jobs and schedule == "every tick"
            if not concurrent and not self.app.db.write(lambda c, n=name, s=schedule, t=ttl, now=started: claim_job(
                    c, name=n, schedule=s, owner=self.owner, now=now, ttl_ms=t, force=force)):
                continue
            error: BaseException | None = None
            token = _tick_time.set(started)
            try:
                results[name] = fn()
            except Exception as exc:  # noqa: BLE001 - one failing job must not stop the others
                log.exception("background job %s failed; it will be retried on the next tick", name)
                results[name] = error = exc
            finally:
                _tick_time.reset(token)
                finished = max(self.clock(), started)
                self.app.db.write(lambda c, n=name, s=schedule, e=error, f=finished, st=started: finish_job(
                    c, name=n, schedule=s, owner=self.owner, started=st, finished=f, error=e, retry_ms=tick_ms))
        return results

    def _maybe_due(self, name: str, schedule: str, now: int) -> bool:
        row = self.app.db.read(lambda c: c.one("SELECT schedule, nextRunAt FROM schedulerJobs WHERE name = ?",
                                               (name,)))
        return row is None or row["schedule"] != schedule or row["nextRunAt"] <= now

    def _loop(self, delay: float = 0.0) -> None:
        only: set[str] | None = None
        if delay > 0:
            self._wake.wait(delay)
        while not self._stop.is_set():
            try:
                self.run_once(only, force=only is not None)
            except Exception:  # noqa: BLE001
                log.exception("scheduler tick failed")
                time.sleep(0.1)
            woken = self._wake.wait(self.app.settings.tick_seconds)
            if self._stop.is_set():
                break
            if woken:
                self._stop.wait(WAKE_DEBOUNCE_SECONDS)  # let a burst of writes land in one batch
            with self._lock:
                self._wake.clear()
                only = set(self._wanted) if woken else None
                self._wanted.clear()
