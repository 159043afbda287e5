"""`/healthz` and `/readyz` of `serve` (issue #31), for a load balancer or an orchestrator.

- `/healthz`: the process answers (no database access): 200 `{"status": "ok"}`.
- `/readyz`: 200 when this replica can serve calls — the database answers a query, its schema is
  at this release's version (not behind: `migrations pending`), and this process's scheduler thread
  is alive and ticking (when `VP_SCHEDULER` is on); else 503 with the failing check named. Checked
  on every request, so a replica goes not-ready when PostgreSQL stops and ready again when it is
  back, without a restart.
`/health` (the older document with the version and scopes) stays.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..db import latest_version
from ..db.migrate import current_version
from ..pipeline.scheduler import Scheduler

NO_STORE = {"Cache-Control": "no-store"}
STUCK_TICK_SECONDS = 600  # one tick running longer than this: the thread is wedged in a job
# A probe answers within this even when the database hangs (a stopped PostgreSQL can hold a connect
# attempt, a locked SQLite file the busy timeout): the check thread is abandoned, not waited for.
READY_TIMEOUT_SECONDS = 5.0


class WatchedScheduler(Scheduler):
    """The scheduler `serve` runs, remembering when its ticks start and end (for /readyz, /metrics)."""

    def __init__(self, app: Any, **kw: Any) -> None:
        super().__init__(app, **kw)
        self.started_at = time.monotonic()
        self.tick_started: float | None = None
        self.tick_finished: float | None = None
        self._watch_lock = threading.Lock()

    def run_once(self, only: set[str] | None = None, *, force: bool = False) -> dict[str, object]:
        with self._watch_lock:
            self.tick_started = time.monotonic()
        try:
            return super().run_once(only, force=force)
        finally:
            with self._watch_lock:
                self.tick_finished = time.monotonic()

    def thread_alive(self) -> bool:
        thread = getattr(self, "_thread", None)
        return thread is not None and thread.is_alive()

    def tick_age(self) -> float | None:
        with self._watch_lock:
            return None if self.tick_started is None else time.monotonic() - self.tick_started

    def problem(self) -> str | None:
        """Why the scheduler is not alive, or None."""
        if not self.thread_alive():
            return "the scheduler thread is not running"
        now = time.monotonic()
        with self._watch_lock:
            started, finished = self.tick_started, self.tick_finished
        period = float(self.app.settings.tick_seconds)
        grace = max(60.0, 3 * period)
        if started is None:
            return None if now - self.started_at < grace else "the scheduler has not ticked since start"
        if finished is None or finished < started:  # a tick is running
            return None if now - started < STUCK_TICK_SECONDS else f"a scheduler tick has run {now - started:.0f} s"
        if now - finished > period + grace:
            return f"the scheduler last ticked {now - finished:.0f} s ago"
        return None


def _database_checks(app: Any) -> dict[str, Any]:
    """Reachability (one query in a read transaction) and the schema version."""
    app.db.read(lambda c: c.scalar("SELECT 1"))
    version = current_version(app.db)
    return {"version": version, "latest": latest_version()}


async def healthz(_: Request) -> Response:
    return JSONResponse({"status": "ok"}, headers=NO_STORE)


def readyz(app: Any) -> Any:
    async def handle(_: Request) -> Response:
        scheduler = app.scheduler  # set by Scheduler.start(), after the HTTP app was built
        checks: dict[str, Any] = {}
        failing: list[str] = []
        try:
            with anyio.fail_after(READY_TIMEOUT_SECONDS):
                db = await anyio.to_thread.run_sync(_database_checks, app, abandon_on_cancel=True)
            checks["database"] = "ok"
            if db["version"] < db["latest"]:
                checks["migrations"] = f"pending: the schema is at {db['version']}, this release needs {db['latest']}"
                failing.append("migrations")
            else:
                checks["migrations"] = "ok"
        except TimeoutError:
            checks["database"] = f"unreachable: no answer within {READY_TIMEOUT_SECONDS:.0f} s"
            failing.append("database")
        except Exception as exc:  # noqa: BLE001 - any failure to reach the database is "not ready"
            checks["database"] = f"unreachable: {type(exc).__name__}: {str(exc)[:300]}"
            failing.append("database")
        if not app.settings.scheduler:
            checks["scheduler"] = "off (VP_SCHEDULER)"
        else:
            if scheduler is None:
                problem = "the scheduler was not started"
            else:  # a plain Scheduler (not started by serve) has no watch: its thread is all we know
                problem = scheduler.problem() if hasattr(scheduler, "problem") else None
            checks["scheduler"] = problem or "ok"
            if problem:
                failing.append("scheduler")
        body = {"status": "not ready" if failing else "ready", "checks": checks}
        if failing:
            body["failing"] = failing
        return JSONResponse(body, status_code=503 if failing else 200, headers=NO_STORE)

    return handle
