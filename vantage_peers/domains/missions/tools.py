"""MCP tools for missions."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, WithJsonSchema

from ...core.compact import Compact, Detail, dense_text_for, shape
from ...core.envelope import fit_envelope
from ...core.errors import InvalidArgument
from ...core.validators import check_name, require_text
from ...db import Connection
from ...db.paging import Fields
from ...pipeline.app import App
from ...pipeline.policy import Owns, declared_loader
from .. import ports
from . import store
from .vocabulary import MISSION_ALIASES, MISSION_STATUSES, PRIORITIES, resolve_status_filter

MAX_TEXT_BYTES = 200_000
MAX_MISSION_TASKS = 500
# Compact answers (core/compact.py): a mission is its id, name, status, priority, pilot and progress.
MISSION = Compact(keys=("_id", "name", "status", "priority", "pilot", "progress"), short=("description",))
Status = Annotated[str, WithJsonSchema({"type": "string", "enum": list(MISSION_STATUSES)})]
StatusFilter = str | list[str] | None  # a status, a list, or an alias (the server instructions say which)
Progress = Annotated[float, Field(ge=0, le=100)]


def _enum(value: Any, allowed: tuple[str, ...], field: str) -> str:
    if value not in allowed:
        raise InvalidArgument(f"{field} must be one of {', '.join(allowed)} (a lowercase string), got {value!r}")
    return value


def _check(fields: dict[str, Any], *, creating: bool) -> dict[str, Any]:
    """Validate mission fields (those present); returns them with None values dropped."""
    out = {k: v for k, v in fields.items() if v is not None}
    for key in ("name", "project"):
        if key in out:
            require_text(out[key], key, max_bytes=2_000)
    for key in ("description", "brief", "cancelReason"):
        if key in out:
            require_text(out[key], key, max_bytes=MAX_TEXT_BYTES)
    for key in ("pilot", "createdBy"):
        if key in out:
            out[key] = check_name(out[key], key)
    if "priority" in out:
        _enum(out["priority"], PRIORITIES, "priority")
    if "status" in out:
        allowed = MISSION_STATUSES if not creating else MISSION_STATUSES[:-1]
        _enum(out["status"], allowed, "status")
    if "agents" in out:
        if len(out["agents"]) > 200:
            raise InvalidArgument("agents holds more than 200 entries")
        out["agents"] = [check_name(a, "agents[]") for a in out["agents"]]
    for key in ("startDate", "targetDate"):
        if key in out and out[key] < 0:
            raise InvalidArgument(f"{key} must be a Unix ms timestamp >= 0")
    return out


def mission_view(conn: Connection, mission_id: str) -> dict[str, Any] | None:
    row = store.load(conn, mission_id)
    if row is None:
        return None
    doc = store.mission_doc(row)
    rows = conn.query("SELECT * FROM tasks WHERE missionId = ? ORDER BY createdAt, id LIMIT ?",
                      (mission_id, MAX_MISSION_TASKS + 1))
    items = [ports.task_doc(r) for r in rows[:MAX_MISSION_TASKS]]  # offered by tasks (above missions)
    fit = fit_envelope(items, extra=doc, key="tasks")
    doc["tasks"] = items[:fit]
    doc["taskCounts"] = store.task_counts(conn, mission_id)
    if fit < len(rows):
        doc["tasksTruncated"] = True
    return doc


def register(app: App) -> None:
    db = app.db
    dense_text_for(app, ("list_missions",))
    app.add_record("mission", declared_loader("mission"))

    @app.tool("write", identity="createdBy", idempotent=True)
    def create_mission(
        name: str,
        project: str,
        status: Status,
        priority: Annotated[str, Field(description="urgent, high, medium or low")],
        pilot: str,
        agents: list[str],
        createdBy: str | None = None,
        description: str | None = None,
        brief: str | None = None,
        startDate: int | None = None,
        targetDate: int | None = None,
        progress: Annotated[float | None, Field(ge=0, le=100)] = None,
        templateId: str | None = None,
    ) -> str:
        """Create a mission (tasks grouped under a pilot); returns its id.

        Start in `plan` (`brainstorm` for ideas); `templateId` only records lineage (instantiate_template_into_mission makes tasks).
        """
        fields = _check({"name": name, "project": project, "status": status, "priority": priority, "pilot": pilot,
                         "agents": agents, "description": description, "brief": brief, "startDate": startDate,
                         "targetDate": targetDate, "progress": progress, "templateId": templateId}, creating=True)
        fields["createdBy"] = createdBy
        return db.write(lambda c: store.create_mission(c, fields=fields))

    @app.tool("read")
    def get_mission(missionId: str) -> dict[str, Any] | None:
        """Fetch a mission with its tasks and `taskCounts` (if `tasksTruncated`, page list_tasks_by_mission)."""
        return db.read(lambda c: mission_view(c, missionId))

    @app.tool("read")
    def list_missions(
        project: str | None = None,
        pilot: str | None = None,
        status: StatusFilter = None,
        updatedSince: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        fields: Fields = "full",
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """List missions, newest-updated first, by project, pilot or status."""
        keep = resolve_status_filter(status, statuses=MISSION_STATUSES, aliases=MISSION_ALIASES)
        return shape(db.read(lambda c: store.list_missions(c, project=project, pilot=pilot, statuses=keep,
                                                           updated_since=updatedSince, limit=limit, cursor=cursor,
                                                           fields=fields)), detail, MISSION, fields=fields)

    @app.tool("write", identity="callerOrchestrator", identity_required=False)
    def update_mission(
        missionId: str,
        callerOrchestrator: str | None = None,
        name: str | None = None,
        description: str | None = None,
        project: str | None = None,
        brief: str | None = None,
        status: Status | None = None,
        cancelReason: str | None = None,
        priority: str | None = None,
        pilot: str | None = None,
        agents: list[str] | None = None,
        startDate: int | None = None,
        targetDate: int | None = None,
        progress: Annotated[float | None, Field(ge=0, le=100)] = None,
    ) -> None:
        """Update the fields passed of a mission (creator or pilot; cancelling needs `cancelReason`, creator only); returns null."""
        fields = _check({"name": name, "description": description, "project": project, "brief": brief,
                         "status": status, "cancelReason": cancelReason, "priority": priority, "pilot": pilot,
                         "agents": agents, "startDate": startDate, "targetDate": targetDate, "progress": progress},
                        creating=False)
        caller = callerOrchestrator
        db.write(lambda c: store.update_mission(c, mission_id=missionId, fields=fields, caller=caller))

    @app.tool("write", owns=Owns("mission", "missionId", action="update"))
    def update_mission_status(missionId: str, status: Status) -> None:
        """Set a mission's status; returns null (to cancel, update_mission with `cancelReason`)."""
        if status == "cancelled":
            raise InvalidArgument("cancelling needs a reason: use update_mission with status='cancelled' and "
                                  "cancelReason")
        _enum(status, MISSION_STATUSES[:-1], "status")
        db.write(lambda c: store.set_column(c, mission_id=missionId, column="status", value=status))

    @app.tool("write", owns=Owns("mission", "missionId", action="update"))
    def update_mission_progress(missionId: str, progress: Progress) -> None:
        """Set a mission's manual progress (0-100); returns null."""
        db.write(lambda c: store.set_column(c, mission_id=missionId, column="progress", value=progress))
