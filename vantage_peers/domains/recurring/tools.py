"""MCP tools for recurring task templates (spec §13) and the scheduler job that fires them."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ...db.paging import Fields
from ...pipeline.app import App
from ...pipeline.scheduler import tick_now
from . import store

Cron = Annotated[str, Field(description="5-field cron (minute hour day month weekday), e.g. '0 9 * * 1-5'")]
Zone = Annotated[str | None, Field(description="IANA zone the cron is read in (default UTC)")]
Priority = Annotated[str | None, Field(description="urgent, high, medium (default) or low")]
JOB = "recurring-tasks"


def register(app: App) -> None:
    db = app.db
    # Every tick, in every process: a due template fires within one tick of its time while any
    # server runs, even just after another was killed. Compare-and-set makes concurrent ticks safe.
    app.add_job(JOB, lambda: store.fire_due(db, now=tick_now()))
    app.allow_concurrent(JOB)

    @app.tool("write", identity="createdBy", identity_required=False, idempotent=True)
    def create_recurring_task(
        title: str,
        assignedTo: str,
        cronExpression: Cron,
        priority: Priority = None,
        description: str | None = None,
        project: str | None = None,
        timezone: Zone = None,
        createdBy: str | None = None,
    ) -> str:
        """Create a cron template that creates a `todo` task at each occurrence; returns its id.

        The tasks have `createdBy` `cron-<id>`; only the creator (or `system`) may change the template.
        """
        payload = {"title": title, "assignedTo": assignedTo, "cronExpression": cronExpression,
                   "priority": priority, "description": description, "project": project, "timezone": timezone,
                   "createdBy": createdBy}
        return db.write(lambda c: store.create(c, payload=payload))

    @app.tool("read")
    def get_recurring_task(recurringTaskId: str) -> dict[str, Any] | None:
        """Fetch a recurring task template with its schedule and runs."""
        return db.read(lambda c: store.get(c, template_id=recurringTaskId))

    @app.tool("read")
    def list_recurring_tasks(
        assignedTo: str | None = None,
        project: str | None = None,
        paused: bool | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        fields: Fields = "full",
    ) -> dict[str, Any]:
        """List recurring task templates newest first, by `assignedTo`, `project` and `paused`."""
        return db.read(lambda c: store.list_templates(c, limit=limit, cursor=cursor, fields=fields,
                                                      assigned_to=assignedTo, project=project, paused=paused))

    @app.tool("write", identity="callerOrchestrator", identity_required=False)
    def update_recurring_task(
        recurringTaskId: str,
        cronExpression: str | None = None,
        timezone: str | None = None,
        title: str | None = None,
        description: str | None = None,
        assignedTo: str | None = None,
        priority: str | None = None,
        project: str | None = None,
        callerOrchestrator: str | None = None,
    ) -> dict[str, Any]:
        """Change a template's schedule or task fields (creator or `system`); returns it.

        Tasks already created are unchanged.
        """
        payload = {"cronExpression": cronExpression, "timezone": timezone, "title": title,
                   "description": description, "assignedTo": assignedTo, "priority": priority, "project": project}
        caller = callerOrchestrator
        return db.write(lambda c: store.update(c, template_id=recurringTaskId, payload=payload, caller=caller))

    @app.tool("destructive", identity="callerOrchestrator")
    def delete_recurring_task(recurringTaskId: str, callerOrchestrator: str | None = None) -> dict[str, Any]:
        """Delete a template for good (creator or `system`), keeping its tasks; returns `{deleted}`."""
        caller = callerOrchestrator
        return db.write(lambda c: store.delete(c, template_id=recurringTaskId, caller=caller))

    @app.tool("idempotent", identity="callerOrchestrator", identity_required=False)
    def pause_recurring_task(recurringTaskId: str, callerOrchestrator: str | None = None) -> dict[str, Any]:
        """Pause a template: no task until resumed (creator or `system`); returns it."""
        caller = callerOrchestrator
        return db.write(lambda c: store.pause(c, template_id=recurringTaskId, caller=caller))

    @app.tool("idempotent", identity="callerOrchestrator", identity_required=False)
    def resume_recurring_task(recurringTaskId: str, callerOrchestrator: str | None = None) -> dict[str, Any]:
        """Resume a paused template from its next occurrence, missed runs skipped (creator or `system`); returns it."""
        caller = callerOrchestrator
        return db.write(lambda c: store.resume(c, template_id=recurringTaskId, caller=caller))
