"""`vantage-peers status`: the shared file at a glance, for a person at a terminal (or `--json`).

Peers with their last seen and whether a server process of theirs is live (its heartbeat, issue
#30: docs/presence.md), the server processes, unread receipts per recipient, open tasks per
assignee, the scheduler's jobs (cadence, and which process holds a job's lease right now) and the
leases in force (task claims, path reservations, slots) with their holders and expiry.

It reads the file without building the app or importing the MCP SDK (#34: a person waits on it):
the jobs and corpora every process registers are stored in `status_registry.json`, generated from
a full registration and held to it by tests/entry/test_status_registry.py.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .pipeline.settings import Settings

OPEN_TASK_STATUSES = ("todo", "in_progress", "review", "blocked")
REGISTRY = Path(__file__).with_name("status_registry.json")


@dataclass(frozen=True)
class StoredCorpus:
    """What the embedding backlog reads of a corpus (search.corpus.Corpus): its name and job table."""

    name: str
    jobs: str


def generate(app: Any) -> dict[str, Any]:
    """The registry file's content, from an App on which every domain registered: each job with its
    cadence in registration order, each corpus in serving order."""
    from .domains.memory import indexer

    schedules = [(name, app.job_schedules.get(name, {})) for name, _fn in app.jobs]
    return {"jobs": [[name, s.get("every_seconds"), s.get("cron")] for name, s in schedules],
            "corpora": [[c.name, c.jobs] for c in indexer.corpora_of(app.corpora)]}


def render_registry(content: dict[str, Any]) -> str:
    """One entry per line (a diff shows the job that changed)."""
    parts = [f' "{key}": [\n' + ",\n".join(f"  {json.dumps(entry)}" for entry in content[key]) + "\n ]"
             for key in ("jobs", "corpora")]
    return "{\n" + ",\n".join(parts) + "\n}\n"


def reader(settings: Settings) -> Any:
    """What collect() reads: the database and the stored registry (a full app if the file is unreadable)."""
    try:
        stored = json.loads(REGISTRY.read_text(encoding="utf-8"))
        jobs = [(str(name), None) for name, _every, _cron in stored["jobs"]]
        schedules = {str(name): {"every_seconds": every, "cron": cron} for name, every, cron in stored["jobs"]}
        corpora = [StoredCorpus(str(name), str(table)) for name, table in stored["corpora"]]
    except (OSError, ValueError, KeyError, TypeError):
        from .server import create_app

        return create_app(settings, serve=False)
    from .db import open_database

    return SimpleNamespace(settings=settings, db=open_database(settings), jobs=jobs, job_schedules=schedules,
                           corpora=corpora)


def collect(app: Any) -> dict[str, Any]:
    now = int(time.time() * 1000)

    def read(c):
        peers = [dict(r) for r in c.query(
            "SELECT orchestratorId, instanceId, summary, currentTask, lastSeen FROM instances "
            "ORDER BY lastSeen DESC, id DESC LIMIT 200")]
        unread = [dict(r) for r in c.query(
            "SELECT recipient, coalesce(recipientInstanceId, '') AS instanceId, count(*) AS unread "
            "FROM messageReceipts WHERE readAt IS NULL GROUP BY recipient, recipientInstanceId "
            "ORDER BY unread DESC, recipient")]
        marks = ",".join("?" * len(OPEN_TASK_STATUSES))
        rows = c.query(f"SELECT assignedTo, status, count(*) AS n FROM tasks WHERE status IN ({marks}) "
                       "GROUP BY assignedTo, status", OPEN_TASK_STATUSES)
        return peers, unread, rows

    from .domains.profiles import processes  # #30: server processes and their heartbeats

    peers, unread, rows = app.db.read(read)
    procs, running = app.db.read(lambda c: (processes.by_identity(c, now=now), processes.overview(c, now=now)))
    dead_after = app.settings.dead_after_seconds * 1000
    for p in peers:  # #21: silent for VP_DEAD_AFTER_SECONDS = stale (broadcasts do not wait on it)
        p["stale"] = p["lastSeen"] < now - dead_after
        # #30: live = a server process of this instance heartbeats now; `processes` counts them.
        known = procs.get((p["orchestratorId"], p["instanceId"] or ""), {})
        p["live"], p["processes"] = known.get("processes", 0) > 0, known.get("processes", 0)
        p["heartbeatAt"] = known.get("heartbeatAt")
    tasks: dict[str, dict[str, int]] = {}
    for r in rows:
        counts = tasks.setdefault(r["assignedTo"], {s: 0 for s in OPEN_TASK_STATUSES})
        counts[r["status"]] = r["n"]
    open_tasks = [{"assignedTo": who, "open": sum(c.values()), **c}
                  for who, c in sorted(tasks.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))]
    from .domains.recurring import scheduler_overview

    overview = scheduler_overview(app.db, now=now)
    ran = {j["name"]: j for j in overview["jobs"]}  # run state kept in the file by every process
    jobs = []
    for name, _fn in app.jobs:
        sched = app.job_schedules.get(name, {})
        state = ran.get(name, {})  # `running`: its lease is held now, by the process that last started it
        jobs.append({"name": name, "everySeconds": sched.get("every_seconds"), "cron": sched.get("cron"),
                     "runningBy": state.get("lastOwner") if state.get("running") else None,
                     "lastRunAt": state.get("lastFinishedAt"),
                     "lastStatus": state.get("lastStatus"), "nextRunAt": state.get("nextRunAt"),
                     "runCount": state.get("runCount", 0)})
    from .db.fileguard import stale_holders  # servers still holding a deleted or replaced file (#19)
    from .domains.leases import store as leases  # leases (#22): claims, path reservations, slots in force
    from .domains.memory import indexer

    held = app.db.read(lambda c: leases.overview(c, now=now))
    on_file = app.db.backend == "sqlite"  # PostgreSQL (issue #25): no file, no process holding it
    stale = [{"pid": pid, "holds": what} for pid, what in stale_holders(app.settings.db_path)] if on_file else []
    backlog = app.db.read(lambda c: indexer.pending(c, app.corpora))  # rows waiting for a vector (#20)
    return {"database": str(app.db.path), "staleHolders": stale, "now": now, "peers": peers, "processes": running,
            "unread": unread,
            "openTasks": open_tasks, "jobs": jobs, "tickSeconds": app.settings.tick_seconds,
            "recurring": overview["recurring"], "leases": held, "embeddingBacklog": backlog}


def _ago(now: int, then: int | None) -> str:
    if not then:
        return "never"
    s = max(0, (now - then) // 1000)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit} ago"
    return f"{s}s ago"


def _in(now: int, then: int | None) -> str:
    if not then:
        return "—"
    if then <= now:
        return "due now"
    s = (then - now) // 1000
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"in {s // size}{unit}"
    return f"in {s}s"


def render(data: dict[str, Any]) -> str:
    now = data["now"]
    out = [f"database: {data['database']}"]
    for h in data.get("staleHolders", []):
        out.append(f"  DB_FILE_GONE: process {h['pid']} holds {h['holds']} of this file and refuses writes; "
                   "restart it")
    out += ["", f"peers ({len(data['peers'])}):"]
    for p in data["peers"]:
        who = p["orchestratorId"] + (f"/{p['instanceId']}" if p["instanceId"] else "")
        doing = f"  {p['summary']}" if p.get("summary") else ""
        stale = "  STALE" if p.get("stale") else ""
        # LIVE: a server process of it heartbeats; GONE: its processes stopped or died (last heartbeat shown).
        state = "  LIVE" if p.get("live") else (f"  GONE (heartbeat {_ago(now, p['heartbeatAt'])})"
                                               if p.get("heartbeatAt") else "")
        out.append(f"  {who:<32} {_ago(now, p['lastSeen']):>10}{state}{stale}{doing[:80]}")
    if not data["peers"]:
        out.append("  (none yet: a server started with VP_ORCHESTRATOR registers on its first call)")
    procs = data.get("processes") or []
    out += ["", f"server processes ({sum(1 for x in procs if x['live'])} live; heartbeats, gone ones kept a day):"]
    for x in procs:
        who = (x.get("orchestratorId") or "-") + (f"/{x['instanceId']}" if x.get("instanceId") else "")
        if x["live"]:
            how = f"live, heartbeat {_ago(now, x['heartbeatAt'])}"
        elif x.get("stoppedAt"):
            how = f"stopped {_ago(now, x['stoppedAt'])}"
        else:
            how = f"GONE, last heartbeat {_ago(now, x['heartbeatAt'])}"
        out.append(f"  {who:<32} pid {x['pid']:<8} {x['host'][:20]:<20} {x['transport']:<6} {how}  {x['session']}")
    if not procs:
        out.append("  (none)")
    out += ["", "unread messages:"]
    for u in data["unread"]:
        who = u["recipient"] + (f"/{u['instanceId']}" if u["instanceId"] else "")
        out.append(f"  {who:<32} {u['unread']:>6}")
    if not data["unread"]:
        out.append("  (none)")
    out += ["", "open tasks by assignee:    open   todo  in_progress  review  blocked"]
    for t in data["openTasks"]:
        out.append(f"  {t['assignedTo']:<24} {t['open']:>6} {t['todo']:>6} {t['in_progress']:>12} "
                   f"{t['review']:>7} {t['blocked']:>8}")
    if not data["openTasks"]:
        out.append("  (none)")
    out += ["", f"scheduler jobs (each server process runs them every {data['tickSeconds']:g}s tick "
                "unless a cadence is shown):"]
    for j in data["jobs"]:
        cadence = f"cron {j['cron']}" if j["cron"] else (f"every {j['everySeconds']:g}s" if j["everySeconds"]
                                                          else "every tick")
        running = f"  running now in {j['runningBy']}" if j["runningBy"] else ""
        last = f"last {_ago(now, j['lastRunAt'])} ({j['lastStatus']})" if j.get("lastRunAt") else "never run"
        out.append(f"  {j['name']:<32} {cadence:<20} {last}{running}")
    if not data["jobs"]:
        out.append("  (none registered)")
    backlog = data.get("embeddingBacklog") or {}
    waiting = ", ".join(f"{n} {name}" for name, n in backlog.get("byCorpus", {}).items())
    out += ["", f"embedding backlog: {backlog.get('pending', 0)} waiting" + (f" ({waiting})" if waiting else "")]
    if backlog.get("maxAttempts"):
        out.append(f"  up to {backlog['maxAttempts']} failed attempts; last error: {backlog.get('lastError')}")
    rec = data.get("recurring") or {}
    out += ["", f"recurring tasks: {rec.get('active', 0)} active, {rec.get('paused', 0)} paused; next due:"]
    for t in rec.get("nextDue", []):
        when = _in(now, t.get("nextRunAt"))
        out.append(f"  {when:>12}  {t.get('cronExpression', ''):<16} {t.get('assignedTo', ''):<12} {t.get('title', '')[:60]}")
    if not rec.get("nextDue"):
        out.append("  (none)")
    held = data.get("leases") or []
    out += ["", f"leases in force ({len(held)}; task claims, path reservations, slots):"]
    for lease in held:
        who = lease["holder"] + (f"/{lease['holderInstance']}" if lease.get("holderInstance") else "")
        what = f"{lease['kind']} {lease['key']}" + (f"  ({lease['repo']})" if lease.get("repo") else "")
        out.append(f"  {what[:60]:<60} {who:<24} expires {_in(now, lease['expiresAt']):<9} "
                   f"token {lease['fencingToken']}")
    if not held:
        out.append("  (none)")
    return "\n".join(out) + "\n"


def run_status(settings: Settings | None = None, *, as_json: bool = False, out=None) -> int:
    out = out or sys.stdout
    app = reader(settings or Settings.from_env())  # no app, no MCP server: nothing is served (#34)
    try:
        data = collect(app)
    finally:
        app.db.close()
    out.write(json.dumps(data, indent=2) + "\n" if as_json else render(data))
    return 0
