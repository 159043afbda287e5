"""MCP tools for mission templates. The documented templates are seeded when the app starts."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from ...core.errors import InvalidArgument
from ...core.validators import check_name, require_text
from ...db.paging import Fields
from ...pipeline.app import App
from ...pipeline.policy import Owns, declared_loader
from . import store


class TemplateStep(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = Field(min_length=1, max_length=500)
    description: str = Field(max_length=20_000)
    assignedTo: str | None = Field(default=None, min_length=1, max_length=200)
    dependsOn: list[int] | None = Field(default=None, max_length=100, description="indexes of earlier steps")
    tags: list[Annotated[str, Field(min_length=1, max_length=100)]] | None = Field(default=None, max_length=50)


def register(app: App) -> None:
    db = app.db
    # Seeded templates are written by `system`: only master/system may edit them.
    app.add_record("template", declared_loader("template"))
    # Seed the documented templates once per file (a read first, so a normal start takes no write lock).
    if db.read(store.missing_seeds):
        db.write(store.seed_templates)

    @app.tool("read")
    def get_mission_template(name: str) -> dict[str, Any] | None:
        """Fetch a mission template by name with its steps (e.g. issue-resolution-v3, the default)."""
        return db.read(lambda c: store.get_template(c, name=name))

    @app.tool("read")
    def list_mission_templates(
        limit: int | None = None, cursor: str | None = None, fields: Fields = "full"
    ) -> dict[str, Any]:
        """List mission templates by name."""
        return db.read(lambda c: store.list_templates(c, limit=limit, cursor=cursor, fields=fields))

    def upsert(name: str, steps: list[TemplateStep], description: str | None, isDefault: bool | None,
               createdBy: str | None) -> dict[str, Any]:
        require_text(name, "name", max_bytes=200)
        who = createdBy
        if description is not None:
            require_text(description, "description", max_bytes=20_000)
        for i, step in enumerate(steps):
            if not step.title.strip():
                raise InvalidArgument(f"steps[{i}].title must be a non-empty string")
            if step.assignedTo is not None:
                check_name(step.assignedTo, f"steps[{i}].assignedTo")
        data = [s.model_dump(exclude_none=True) for s in steps]
        return db.write(lambda c: store.upsert_template(c, name=name.strip(), steps=data, description=description,
                                                        is_default=isDefault, created_by=who))

    doc = """Create or replace a mission template by `name`; returns `{templateId, created, stepCount}`.

    Omitted `description`/`isDefault` keep theirs; `isDefault: true` makes it the only default.
    """
    def update_mission_template(
        name: str,
        steps: Annotated[list[TemplateStep], Field(min_length=1, max_length=store.MAX_STEPS)],
        createdBy: str | None = None,
        description: str | None = None,
        isDefault: bool | None = None,
    ) -> dict[str, Any]:
        return upsert(name, steps, description, isDefault, createdBy)

    for tool_name in ("update_mission_template", "upsert_mission_template"):
        app.tool("idempotent", name=tool_name, description=doc, identity="createdBy",
                 owns=Owns("template", "name", action="edit"))(update_mission_template)

    @app.tool("write", identity="callerOrchestrator", identity_required=False,
              owns=Owns("mission", "missionId", action="add tasks to"), idempotent=True)
    def instantiate_template_into_mission(
        templateName: str,
        missionId: str,
        context: dict[str, str] | None = None,
        titlePrefix: str | None = None,
        callerOrchestrator: str | None = None,
    ) -> dict[str, Any]:
        """Create one task per template step in a mission; returns `{taskIds, count}`.

        Assignee: the step's, else the pilot; `{{key}}` placeholders come from `context`.
        """
        ctx = dict(context or {})
        if len(ctx) > 100:
            raise InvalidArgument("context holds more than 100 keys")
        if titlePrefix is not None:
            require_text(titlePrefix, "titlePrefix", max_bytes=200)
        caller = callerOrchestrator
        return db.write(lambda c: store.instantiate(c, template_name=templateName, mission_id=missionId, context=ctx,
                                                    title_prefix=titlePrefix.strip() if titlePrefix else None,
                                                    caller=caller))
