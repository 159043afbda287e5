"""Read models of the work-side views: Tasks (board, list, detail), Missions, Schedule and Memory.

Filters and paging go through the domain stores' own functions (`tasks.store.task_filters`,
`missions.store.list_missions`, `memory.search.hybrid` …) so the dashboard shows exactly what the
tools return — to the person's client: tasks narrowed by `readers` (tasks.store.visible), memories
by `prefixes` (the namespaces its profile reads), None = everything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core import cron
from ..core.errors import InvalidArgument
from ..core.scopes import sql_filter
from ..db import Connection, loads
from ..db.paging import keyset_page
from ..domains.memory import search as msearch
from ..domains.memory import store as memory_store
from ..domains.missions import store as missions
from ..domains.recurring import store as recurring
from ..domains.tasks import segments
from ..domains.tasks import store as tasks
from ..domains.tasks.rules import OPEN_STATUSES, PRIORITIES, TASK_STATUSES, status_sql

PAGE = 25
BOARD_CARDS = 12  # cards per status column; "more" opens that column as a paged list
BOARD_STATUSES = ("todo", "in_progress", "review", "blocked", "done")


Readers = tuple[str, ...] | None


def _where(*, assignee: str | None, mission: str | None, priority: str | None, overdue: bool, now: int,
           status: str | None, readers: Readers) -> tuple[list[str], list[Any]]:
    if priority is not None and priority not in PRIORITIES:
        raise InvalidArgument(f"priority {priority!r} is not one of {', '.join(PRIORITIES)}")
    if status is not None and status not in TASK_STATUSES:
        raise InvalidArgument(f"status {status!r} is not one of {', '.join(TASK_STATUSES)}")
    where, params = tasks.task_filters(assigned_to=assignee, mission_id=mission,
                                       statuses=(status,) if status else None)
    if priority is not None:
        where.append("priority = ?")
        params.append(priority)
    if overdue:
        where += ["dueDate IS NOT NULL", "dueDate < ?", status_sql("status", OPEN_STATUSES)]
        params.append(now)
    seen, seen_params = tasks.visible(readers)
    return where + seen, params + seen_params


def task_board(conn: Connection, *, assignee: str | None, mission: str | None, priority: str | None,
               overdue: bool, blocked: bool, now: int, readers: Readers = None) -> dict[str, Any]:
    """One column per status (only `blocked` when asked), each the first BOARD_CARDS, newest first."""
    columns = []
    for status in ("blocked",) if blocked else BOARD_STATUSES:
        where, params = _where(assignee=assignee, mission=mission, priority=priority, overdue=overdue, now=now,
                               status=status, readers=readers)
        page = keyset_page(conn, table="tasks", to_item=tasks.task_doc, where=where, params=params,
                           sort_col="updatedAt", limit=BOARD_CARDS)
        columns.append({"status": status, "items": page["items"], "more": "nextCursor" in page})
    return {"columns": columns}


def task_list(conn: Connection, *, status: str | None, assignee: str | None, mission: str | None,
              priority: str | None, overdue: bool, cursor: str | None, now: int,
              readers: Readers = None) -> dict[str, Any]:
    where, params = _where(assignee=assignee, mission=mission, priority=priority, overdue=overdue, now=now,
                           status=status, readers=readers)
    return keyset_page(conn, table="tasks", to_item=tasks.task_doc, where=where, params=params,
                       sort_col="updatedAt", limit=PAGE, cursor=cursor)


def task_history(conn: Connection, task: dict[str, Any]) -> list[dict[str, Any]]:
    """What happened to a task, oldest first: created, each work segment, people's actions, the end."""
    events: list[dict[str, Any]] = [{"at": task["_creationTime"], "what": "created", "who": task.get("createdBy")}]
    for seg in task.get("workSegments", []):
        events.append({"at": seg["startedAt"], "what": "started", "who": seg.get("orchestrator")})
        if "endedAt" in seg:
            events.append({"at": seg["endedAt"], "what": "stopped", "who": seg.get("orchestrator"),
                           "detail": f"{seg['minutes']} min"})
    for r in conn.query("SELECT actor, action, detail, createdAt, via FROM humanActions WHERE targetId = ? "
                        "ORDER BY createdAt LIMIT 200", (task["_id"],)):
        events.append({"at": r["createdAt"], "what": r["action"], "who": r["actor"], "via": r["via"],
                       "detail": _detail(r["detail"])})
    if task.get("completedAt"):
        events.append({"at": task["completedAt"], "what": "done", "who": task.get("assignedTo"),
                       "detail": task.get("completionNote")})
    if task.get("status") == "blocked" and task.get("blockedBy"):
        events.append({"at": task["updatedAt"], "what": "blocked", "detail": task["blockedBy"]})
    if task.get("status") == "cancelled":
        events.append({"at": task["updatedAt"], "what": "cancelled", "detail": task.get("cancelReason")})
    events.sort(key=lambda e: e["at"] or 0)
    return events


def _detail(raw: str | None) -> str | None:
    data = loads(raw) if raw else None
    if isinstance(data, dict):
        return ", ".join(f"{k}: {v}" for k, v in data.items() if v not in (None, ""))
    return None


def task_detail(conn: Connection, task_id: str, readers: Readers = None) -> dict[str, Any] | None:
    """A task with its history; None when there is none `readers` may read (the page says 404)."""
    if not tasks.can_read(conn, task_id, readers):
        return None
    task = tasks.get_task(conn, task_id=task_id)
    if task is None:
        return None
    task["history"] = task_history(conn, task)
    mission = missions.load(conn, task["missionId"]) if task.get("missionId") else None
    task["missionName"] = mission["name"] if mission else None
    task["openSegment"] = segments.open_row(conn, task_id=task_id) is not None
    return task


# -- Missions ---------------------------------------------------------------------------------
def mission_list(conn: Connection, *, status: str | None, pilot: str | None, project: str | None,
                 cursor: str | None) -> dict[str, Any]:
    from ..domains.missions.vocabulary import MISSION_ALIASES, MISSION_STATUSES, resolve_status_filter

    statuses = resolve_status_filter(status, statuses=MISSION_STATUSES, aliases=MISSION_ALIASES) if status else None
    page = missions.list_missions(conn, project=project, pilot=pilot, statuses=statuses, updated_since=None,
                                  limit=PAGE, cursor=cursor, fields="full")
    for m in page["items"]:
        m["counts"] = missions.task_counts(conn, m["_id"])
        m["percent"] = percent(m["counts"])
    return page


def percent(counts: dict[str, int]) -> int:
    """Done over the tasks still expected (cancelled ones never will be)."""
    expected = counts["total"] - counts["cancelled"]
    return round(100 * counts["done"] / expected) if expected else 0


def mission_detail(conn: Connection, mission_id: str, *, cursor: str | None,
                   readers: Readers = None) -> dict[str, Any] | None:
    row = missions.load(conn, mission_id)
    if row is None:
        return None
    mission = missions.mission_doc(row)
    mission["counts"] = missions.task_counts(conn, mission_id)
    mission["percent"] = percent(mission["counts"])
    mission["tasks"] = tasks.list_tasks(conn, limit=PAGE, cursor=cursor, fields="full", mission_id=mission_id,
                                        readers=readers)
    return mission


# -- Schedule ---------------------------------------------------------------------------------
def schedule(conn: Connection, *, assignee: str | None, paused: str | None, cursor: str | None,
             now: int) -> dict[str, Any]:
    """Recurring tasks with their next three occurrences; scheduler jobs with their last result."""
    flag = {"yes": True, "no": False}.get(paused or "")
    page = recurring.list_templates(conn, limit=PAGE, cursor=cursor, fields="full", assigned_to=assignee,
                                    paused=flag)
    for item in page["items"]:
        item["next"] = [] if item.get("paused") else upcoming(item["cronExpression"], item["timezone"], now)
    jobs = conn.query("SELECT j.*, l.owner AS leaseOwner, l.expiresAt AS leaseExpiresAt FROM schedulerJobs j "
                      "LEFT JOIN leases l ON l.name = 'job:' || j.name ORDER BY j.name LIMIT 200")
    for job in jobs:
        job["running"] = bool(job["leaseOwner"] and (job["leaseExpiresAt"] or 0) > now)
    return {"recurring": page, "jobs": jobs}


def upcoming(expression: str, timezone: str, now: int, n: int = 3) -> list[int]:
    try:
        sched = cron.schedule(expression, timezone)
    except (InvalidArgument, ValueError):
        return []
    out, after = [], now
    for _ in range(n):
        after = cron.next_after(sched, after)
        out.append(after)
    return out


# -- Memory -----------------------------------------------------------------------------------
def memory_list(conn: Connection, *, namespace: str | None, types: Sequence[str] | None,
                cursor: str | None, now: int, prefixes: tuple[str, ...] | None = None) -> dict[str, Any]:
    return memory_store.list_memories(conn, scope=memory_store.scope_of(namespace, visible=prefixes), types=list(types or []) or None,
                                      limit=PAGE, cursor=cursor, fields="full", now=now)


def memory_search(conn: Connection, *, query: str, vector: list[float] | None, reason: str | None,
                  namespace: str | None, types: Sequence[str] | None, now: int, limit: int = PAGE,
                  prefixes: tuple[str, ...] | None = None) -> dict[str, Any]:
    """`hybrid_search`'s store function when there is a query vector: each hit says which rankers
    found it and its rank in each. Without one, the keyword search `hybrid_search` falls back to
    with `keywordOnly` (every word first, then any): BM25 of an OR over a word that half the
    memories hold costs ~10x more and ranks the same hits first."""
    scope, kinds = memory_store.scope_of(namespace, visible=prefixes), list(types or []) or None
    if vector is None:
        found = msearch.text_search(conn, query=query, scope=scope, types=kinds, include_superseded=False,
                                    limit=limit, now=now)
        for rank, item in enumerate(found["items"], 1):
            item.setdefault("matchedBy", ["keyword"])
            item.setdefault("ranks", {"keyword": rank})
        return {**found, "reason": reason}
    return msearch.hybrid(conn, query=query, vector=vector, reason=reason, scope=scope, types=kinds,
                          include_superseded=False, limit=limit, now=now)


def memory_types(conn: Connection, prefixes: tuple[str, ...] | None = None) -> list[str]:
    if prefixes is not None:  # the types of the memories the person may read
        clause, params = sql_filter(prefixes, "namespace")
        return [r["type"] for r in conn.query(f"SELECT DISTINCT type FROM memories WHERE {clause} LIMIT 50", params)]
    return [r["type"] for r in conn.query("SELECT DISTINCT type FROM memories INDEXED BY memories_by_type LIMIT 50")]
