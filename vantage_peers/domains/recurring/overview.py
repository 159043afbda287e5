"""What the scheduler is doing on this file: jobs, their last runs, and the next recurring occurrences.

`scheduler_overview(db)` is a plain dict for `vantage-peers status` (or any caller);
`doctor_lines(settings, db)` renders it as doctor check lines.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ...core.ids import now_ms
from ...db import Connection, Database
from . import store

NEXT_DUE = 10


def _jobs(conn: Connection, now: int) -> list[dict[str, Any]]:
    rows = conn.query(
        "SELECT j.*, l.owner AS leaseOwner, l.expiresAt AS leaseExpiresAt FROM schedulerJobs j "
        "LEFT JOIN leases l ON l.name = 'job:' || j.name ORDER BY j.name"
    )
    out = []
    for row in rows:
        item = {k: v for k, v in row.items() if v is not None and k not in ("leaseOwner", "leaseExpiresAt")}
        item["running"] = bool(row["leaseOwner"] and (row["leaseExpiresAt"] or 0) > now)
        if row["schedule"] == "every tick":
            item.pop("nextRunAt", None)  # always due: the next tick of any process runs it
        out.append(item)
    return out


def scheduler_overview(db: Database, *, now: int | None = None) -> dict[str, Any]:
    """`{now, jobs: [...], recurring: {active, paused, nextDue: [...]}}` read in one snapshot."""
    now = now if now is not None else now_ms()

    def read(conn: Connection) -> dict[str, Any]:
        counts = conn.one("SELECT count(*) AS total, coalesce(sum(paused), 0) AS paused FROM recurringTasks")
        return {
            "now": now,
            "jobs": _jobs(conn, now),
            "recurring": {
                "active": counts["total"] - counts["paused"],
                "paused": counts["paused"],
                "nextDue": store.next_due(conn, limit=NEXT_DUE),
            },
        }

    return db.read(read)


def _when(ms: int | None, now: int) -> str:
    if ms is None:
        return "never"
    stamp = datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    delta = (ms - now) // 1000
    span = abs(delta)
    text = (f"{span}s" if span < 120 else f"{span // 60}m" if span < 7200 else f"{span // 3600}h"
            if span < 172_800 else f"{span // 86_400}d")
    return f"{stamp} ({'in ' + text if delta > 0 else text + ' ago'})"


def doctor_lines(settings: Any, db: Database, *, now: int | None = None) -> list[tuple[str, str, str]]:
    """(status, label, detail) lines: the scheduler setting, each job's last run, the next occurrences."""
    view = scheduler_overview(db, now=now)
    now = view["now"]
    if settings.scheduler:
        lines = [("ok", "scheduler", f"on in each server process, tick {settings.tick_seconds:g}s")]
    else:
        lines = [("WARN", "scheduler", "off (VP_SCHEDULER=off): no recurring task fires from these servers")]
    if not view["jobs"]:
        lines.append(("ok", "scheduler jobs", "none has run on this file yet"))
    for job in view["jobs"]:
        detail = f"{job['schedule']}; last run {_when(job.get('lastStartedAt'), now)}"
        if job.get("lastStatus"):
            detail += f", {job['lastStatus']}"
        if job.get("lastStatus") == "error":
            detail += f" ({job.get('lastError', '')[:200]}); retried on the next tick"
        if "nextRunAt" in job:
            detail += f"; next {_when(job['nextRunAt'], now)}"
        if job["running"]:
            detail += "; running now"
        detail += f"; {job['runCount']} run(s), {job['failCount']} failure(s)"
        lines.append(("WARN" if job.get("lastStatus") == "error" else "ok", f"job {job['name']}", detail))
    rec = view["recurring"]
    lines.append(("ok", "recurring tasks", f"{rec['active']} active, {rec['paused']} paused"))
    for item in rec["nextDue"][:5]:
        lines.append(("ok", "next recurring", f"{_when(item.get('nextRunAt'), now)} {item['title'][:60]!r} -> "
                      f"{item['assignedTo']} ({item['cronExpression']} {item['timezone']}, {item['_id']})"))
    return lines
