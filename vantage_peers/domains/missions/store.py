"""Missions: SQL only. The tasks domain calls `complete_if_all_done` inside its own transactions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...core import rbac
from ...core.errors import InvalidArgument, InvalidState, NotFound
from ...core.ids import new_id, now_ms
from ...db import Connection, Row, dumps
from ...db.paging import equals, keyset_page, to_doc
from .vocabulary import MISSION_LITE, status_sql

SIMPLE_FIELDS = ("name", "description", "project", "priority", "pilot", "brief", "startDate", "targetDate",
                 "progress")


def mission_doc(row: Row) -> dict[str, Any]:
    return to_doc(row, json_cols=("agents",))


def load(conn: Connection, mission_id: str) -> Row | None:
    return conn.one("SELECT * FROM missions WHERE id = ?", (mission_id,))


def require(conn: Connection, mission_id: str) -> Row:
    row = load(conn, mission_id)
    if row is None:
        raise NotFound(f"mission {mission_id} does not exist")
    return row


def create_mission(conn: Connection, *, fields: Mapping[str, Any], now: int | None = None) -> str:
    now = now or now_ms()
    mission_id = new_id("msn")
    conn.execute(
        "INSERT INTO missions (id, name, description, project, status, priority, pilot, agents, brief, startDate, "
        "targetDate, progress, templateId, createdBy, createdAt, updatedAt) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (mission_id, fields["name"], fields.get("description"), fields["project"], fields["status"],
         fields["priority"], fields["pilot"], dumps(list(fields["agents"])), fields.get("brief"),
         fields.get("startDate"), fields.get("targetDate"), fields.get("progress"), fields.get("templateId"),
         fields["createdBy"], now, now),
    )
    return mission_id


def update_mission(conn: Connection, *, mission_id: str, fields: Mapping[str, Any], caller: str | None,
                   now: int | None = None) -> None:
    """Partial update. RBAC when `caller` is given: creator or pilot (system bypasses); cancelling
    needs `cancelReason` and the creator, and a complete mission cannot be cancelled."""
    now = now or now_ms()
    row = require(conn, mission_id)
    rbac.require_record(caller, "mission", row, "change", action="update", what=f"mission {mission_id}")
    status = fields.get("status")
    reason = fields.get("cancelReason")
    if status == "cancelled" and row["status"] != "cancelled":
        if not reason:
            raise InvalidArgument("cancelReason is required with status='cancelled'")
        if caller is None:
            raise InvalidArgument(f"callerOrchestrator is required to cancel: only the creator ({row['createdBy']}) "
                                  "may cancel a mission")
        rbac.require_record(caller, "mission", row, "force", action="cancel", what=f"mission {mission_id}")
        if row["status"] == "complete":
            raise InvalidState(f"mission {mission_id} is complete and cannot be cancelled")
    elif reason is not None and status != "cancelled" and row["status"] != "cancelled":
        raise InvalidArgument("cancelReason is only used together with status='cancelled'")
    sets, args = [], []
    for key in (*SIMPLE_FIELDS, "status", "cancelReason"):
        if key in fields and fields[key] is not None:
            sets.append(f"{key} = ?")
            args.append(fields[key])
    if fields.get("agents") is not None:
        sets.append("agents = ?")
        args.append(dumps(list(fields["agents"])))
    sets.append("updatedAt = ?")
    conn.execute(f"UPDATE missions SET {', '.join(sets)} WHERE id = ?", [*args, now, mission_id])


def set_column(conn: Connection, *, mission_id: str, column: str, value: Any, now: int | None = None) -> None:
    """The update shortcuts (status, progress): one atomic statement that also sets updatedAt."""
    assert column in ("status", "progress")
    changed = conn.execute(f"UPDATE missions SET {column} = ?, updatedAt = ? WHERE id = ?",
                           (value, now or now_ms(), mission_id))
    if not changed:
        raise NotFound(f"mission {mission_id} does not exist")


def complete_if_all_done(conn: Connection, mission_id: str | None, now: int) -> bool:
    """Set the mission `complete` when every task of it is done, in one statement.

    Cancelled tasks are never counted as done; they are left out of "every task" (otherwise one
    cancelled task would keep its mission open forever). At least one task must be done.
    """
    if not mission_id:
        return False
    return bool(conn.execute(
        "UPDATE missions SET status = 'complete', updatedAt = ? WHERE id = ? "
        "AND status NOT IN ('complete', 'cancelled') "
        "AND EXISTS (SELECT 1 FROM tasks WHERE missionId = ? AND status = 'done') "
        "AND NOT EXISTS (SELECT 1 FROM tasks WHERE missionId = ? AND status NOT IN ('done', 'cancelled'))",
        (now, mission_id, mission_id, mission_id),
    ))


def task_counts(conn: Connection, mission_id: str) -> dict[str, int]:
    counts = {s: 0 for s in ("todo", "in_progress", "review", "blocked", "done", "cancelled")}
    for r in conn.query("SELECT status, count(*) AS n FROM tasks WHERE missionId = ? GROUP BY status", (mission_id,)):
        counts[r["status"]] = r["n"]
    counts["total"] = sum(counts.values())
    return counts


def list_missions(conn: Connection, *, project: str | None, pilot: str | None, statuses: tuple[str, ...] | None,
                  updated_since: int | None, limit: int | None, cursor: str | None,
                  fields: str | None) -> dict[str, Any]:
    where, params = equals((("project", project), ("pilot", pilot)))
    if statuses is not None:
        where.append(status_sql("status", statuses))
    if updated_since is not None:
        where.append("updatedAt >= ?")
        params.append(updated_since)
    return keyset_page(conn, table="missions", to_item=mission_doc, where=where, params=params,
                       sort_col="updatedAt", limit=limit, cursor=cursor, fields=fields, lite_keys=MISSION_LITE)
