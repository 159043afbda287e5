"""Tasks: create, read, update, delete, lists and search (SQL). Lifecycle verbs live in lifecycle.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...core.errors import InvalidArgument, NotFound
from ...core.ids import new_id, now_ms
from ...core.rbac import require_record
from ...db import Connection, Row, dumps
from ...db.paging import (
    check_fields,
    clamp_limit,
    decode_cursor,
    encode_cursor,
    equals,
    keyset_page,
    project,
    to_doc,
)
from ...search.fts import fts_query
from ...search.keyword import keyword_docs
from .. import ports
from ..missions import store as missions
from . import claims, eligibility, segments
from .eligibility import UNASSIGNED
from .rules import AUTO_GENERATED_SQL, OPEN_STATUSES, TASK_LITE, status_sql
from .validation import create_failures, load_task, raise_failures

JSON_COLS = ("tags", "dependsOn", "files")
# Columns update_task may set directly (status has its own transition rules).
PLAIN_FIELDS = ("title", "description", "project", "assignedTo", "assignedToInstance", "priority", "missionId", "pool",
                "estimatedMinutes", "actualMinutes", "startedAt", "completedAt", "dueDate", "completionNote",
                "cancelReason")


def task_doc(row: Row) -> dict[str, Any]:
    row = dict(row)
    if isinstance(row.get("dependsOn"), list):  # a loaded row; an empty list reads as absent, like NULL
        row["dependsOn"] = dumps(row["dependsOn"]) if row["dependsOn"] else None
    if row.get("assignedTo") == UNASSIGNED:
        row["assignedTo"] = None  # open to its pool: no assignee (absent, like every null)
    return to_doc(row, json_cols=JSON_COLS, bool_cols=("paused",))


def visible(readers: tuple[str, ...] | None, table: str = "tasks") -> tuple[list[str], list[Any]]:
    """Read visibility of tasks: a token reads the tasks its identities created or are assigned,
    the open ones (no assignee or a lapsed claim: claimable work), and every task of a mission they
    pilot, created or take part in. None = every task."""
    if readers is None:
        return [], []
    ids = ",".join("?" * len(readers)) or "NULL"
    sql = (f"({table}.createdBy IN ({ids}) OR {table}.assignedTo IN ({ids}) OR {table}.assignedTo = '' "
           f"OR {table}.lapsedAt IS NOT NULL OR {table}.missionId IN (SELECT m.id FROM missions m WHERE "
           f"m.pilot IN ({ids}) OR m.createdBy IN ({ids}) OR EXISTS (SELECT 1 FROM json_each(m.agents) "
           f"WHERE json_each.value IN ({ids}))))")
    return [sql], [*readers] * 5


def can_read(conn: Connection, task_id: Any, readers: tuple[str, ...] | None) -> bool:
    where, params = visible(readers)
    if not where:
        return True
    return conn.scalar(f"SELECT 1 FROM tasks WHERE id = ? AND {where[0]}", [task_id, *params]) is not None


def require_task(conn: Connection, task_id: Any) -> dict[str, Any]:
    task = load_task(conn, task_id)
    if task is None:
        raise NotFound(f"task {task_id} does not exist")
    return task


def create_task(conn: Connection, *, payload: Mapping[str, Any], now: int | None = None) -> str:
    """Insert a validated task; a task created `in_progress` starts its first work segment now."""
    raise_failures(create_failures(conn, payload))
    now = now or now_ms()
    task_id = new_id("tsk")
    status = payload.get("status") or "todo"
    deps = list(dict.fromkeys(payload.get("dependsOn") or [])) or None
    # pool and files are named only when given: a store called on a file older than migration 019
    # (an upgrade test's fixture) lacks the columns.
    extra = {k: v for k, v in (("pool", payload.get("pool")),
                               ("files", dumps(list(dict.fromkeys(payload["files"]))) if payload.get("files") else None))
             if v is not None}
    cols = "".join(f", {k}" for k in extra)
    conn.execute(
        "INSERT INTO tasks (id, title, description, project, tags, assignedTo, assignedToInstance, priority, status, "
        f"dependsOn, missionId, estimatedMinutes, startedAt, dueDate, createdBy, createdAt, updatedAt{cols}) "
        f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?{', ?' * len(extra)})",
        (task_id, payload["title"], payload.get("description"), payload.get("project"), dumps(payload.get("tags")),
         payload.get("assignedTo") or UNASSIGNED, payload.get("assignedToInstance"), payload["priority"], status,
         dumps(deps), payload.get("missionId"), payload.get("estimatedMinutes"),
         now if status == "in_progress" else None, payload.get("dueDate"), payload["createdBy"], now, now,
         *extra.values()),
    )
    if status == "in_progress":
        segments.open_segment(conn, task_id=task_id, who=payload.get("assignedTo") or None, now=now)
    return task_id


def get_task(conn: Connection, *, task_id: str) -> dict[str, Any] | None:
    """The full task plus its work segments and the state of each dependency."""
    task = load_task(conn, task_id)
    if task is None:
        return None
    doc = task_doc(task)
    doc["workSegments"] = segments.list_segments(conn, task_id=task_id)
    claim, notes = claims.claim_of(conn, task_id, now_ms()), claims.notes_of(conn, task_id)  # leases (#22)
    doc.update({"claim": claim} if claim else {}, **({"notes": notes} if notes else {}))
    deps = task["dependsOn"]
    if deps:
        marks = ",".join("?" for _ in deps)
        found = {r["id"]: r for r in conn.query(f"SELECT id, title, status FROM tasks WHERE id IN ({marks})", deps)}
        doc["dependencies"] = [
            {"_id": d, "title": found[d]["title"], "status": found[d]["status"]} if d in found
            else {"_id": d, "status": "missing"}
            for d in deps
        ]
        # Still open = not done yet and still expected (cancelled and missing ones never will be).
        doc["openDependencies"] = [d for d in deps if d in found and found[d]["status"] in OPEN_STATUSES]
    else:
        doc["dependencies"], doc["openDependencies"] = [], []
    return doc


def apply_fields(conn: Connection, *, task_id: str, payload: Mapping[str, Any], now: int) -> None:
    """Set the plain (non-status) fields present in `payload`."""
    sets, args = [], []
    for key in PLAIN_FIELDS:
        if payload.get(key) is not None:
            sets.append(f"{key} = ?")
            args.append(payload[key])
    for key in JSON_COLS:
        if payload.get(key) is not None:
            value = list(dict.fromkeys(payload[key])) if key == "dependsOn" else payload[key]
            sets.append(f"{key} = ?")
            args.append(dumps(value))
    if payload.get("assignedTo") is not None:
        sets.append("lapsedAt = NULL")  # reassigned by hand: reserved to the new assignee again
    sets.append("updatedAt = ?")
    conn.execute(f"UPDATE tasks SET {', '.join(sets)} WHERE id = ?", [*args, now, task_id])


def delete_task(conn: Connection, *, task_id: str, caller: str) -> dict[str, Any]:
    task = load_task(conn, task_id)
    if task is None:
        return {"deleted": False}
    require_record(caller, "task", task, "force", action="delete (cancel it instead: update_task "
            "status='cancelled' + cancelReason)", what=f"task {task_id}")
    # Remove the id from other tasks' dependsOn so that no dependency dangles.
    conn.execute(
        "UPDATE tasks SET dependsOn = (SELECT json_group_array(value) FROM json_each(tasks.dependsOn) "
        "WHERE value != ?1) WHERE dependsOn IS NOT NULL AND EXISTS "
        "(SELECT 1 FROM json_each(tasks.dependsOn) WHERE value = ?1)",
        (task_id,),
    )
    conn.execute("DELETE FROM tasks WHERE id = ?", (task_id,))
    claims.release_claim(conn, task_id=task_id, now=now_ms(), reason="deleted", by=caller)  # leases (#22)
    # The deleted task may have been the last one not done in its mission.
    missions.complete_if_all_done(conn, task["missionId"], now_ms())
    return {"deleted": True}


def task_filters(*, assigned_to: str | None = None, assigned_to_instance: str | None = None,
                 statuses: tuple[str, ...] | None = None, mission_id: str | None = None, project: str | None = None,
                 created_by: str | None = None, updated_since: int | None = None, created_before: int | None = None,
                 exclude_auto_generated: bool = False) -> tuple[list[str], list[Any]]:
    where, params = equals((("assignedTo", assigned_to), ("assignedToInstance", assigned_to_instance),
                            ("missionId", mission_id), ("project", project), ("createdBy", created_by)))
    if statuses is not None:
        where.append(status_sql("status", statuses))
    if updated_since is not None:
        where.append("updatedAt >= ?")
        params.append(updated_since)
    if created_before is not None:
        where.append("createdAt < ?")
        params.append(created_before)
    if exclude_auto_generated:
        where.append(f"NOT {AUTO_GENERATED_SQL}")
    return where, params


def list_tasks(conn: Connection, *, limit: int | None, cursor: str | None, fields: str | None,
               readers: tuple[str, ...] | None = None, **filters: Any) -> dict[str, Any]:
    """Newest-updated first. The cron filter runs in SQL, so pages are full."""
    where, params = task_filters(**filters)
    seen, seen_params = visible(readers)
    where, params = where + seen, params + seen_params
    return keyset_page(conn, table="tasks", to_item=task_doc, where=where, params=params, sort_col="updatedAt",
                       limit=limit, cursor=cursor, fields=fields, lite_keys=TASK_LITE)


def claimable_page(conn: Connection, *, who: str, instance: str | None, now: int, limit: int | None,
                   cursor: str | None, fields: str | None) -> dict[str, Any]:
    """list_tasks claimable: the todo tasks `who` may check out now, oldest change first, paged."""
    rows = eligibility.claimable(conn, who=who, instance=instance, now=now)
    after = decode_cursor(cursor)
    if after is not None:
        if not isinstance(after[0], int):
            raise InvalidArgument("cursor is not a cursor of list_tasks claimable: pass nextCursor as returned")
        rows = [r for r in rows if (r["updatedAt"], r["id"]) > (after[0], after[1])]
    size = clamp_limit(limit)
    items = [project({**task_doc(r), "claimable": True}, check_fields(fields), (*TASK_LITE, "claimable", "pool"))
             for r in rows[:size]]
    page: dict[str, Any] = {"items": items}
    if len(rows) > size:
        last = rows[size - 1]
        page["nextCursor"] = encode_cursor(last["updatedAt"], last["id"])
    return page


def list_overdue(conn: Connection, *, assigned_to: str | None, limit: int | None, cursor: str | None,
                 fields: str | None, now: int, readers: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Tasks past their dueDate that are neither done nor cancelled, most overdue first."""
    where = ["dueDate IS NOT NULL", "dueDate < ?", status_sql("status", OPEN_STATUSES)]
    params: list[Any] = [now]
    seen, seen_params = visible(readers)
    where, params = where + seen, params + seen_params
    if assigned_to is not None:
        where.append("assignedTo = ?")
        params.append(assigned_to)
    return keyset_page(conn, table="tasks", to_item=task_doc, where=where, params=params, sort_col="dueDate",
                       descending=False, limit=limit, default_limit=50, cursor=cursor, fields=fields,
                       lite_keys=TASK_LITE)


def search_tasks(conn: Connection, *, query: str, limit: int, readers: tuple[str, ...] | None = None,
                 **filters: Any) -> list[dict[str, Any]]:
    """BM25 over title (weight 4) and description (weight 1), best first, each with a title snippet."""
    match = fts_query(query)
    if match is None:
        return []
    where, params = task_filters(**filters)
    seen, seen_params = visible(readers)
    where, params = where + seen, params + seen_params
    # Filters run inside a subquery on `tasks` alone: `title` would be ambiguous next to tasks_fts.
    return keyword_docs(conn, fts="tasks_fts", table="tasks", match=match, limit=limit, inner_where=where,
                        inner_params=params, weights=(4.0, 1.0), snippet="title", shape=task_doc)


ports.task_doc.offer(task_doc)  # get_mission (missions sit below tasks) lists a mission's tasks through it
