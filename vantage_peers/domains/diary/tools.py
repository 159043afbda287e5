"""MCP tools for the diary."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ...core.compact import Compact, Detail, dense_text_for, shape
from ...core.errors import InvalidArgument
from ...core.validators import MAX_CONTENT_BYTES, iso_date, text, text_list
from ...db.paging import Fields, clamp_limit
from ...pipeline.app import App
from ...pipeline.policy import Owns, declared_loader
from . import store

# Compact answers (core/compact.py): an entry is its id, author, date and its content on one line.
ENTRY = Compact(keys=("_id", "orchestrator", "date"), text=("content",))


def register(app: App) -> None:
    db = app.db
    dense_text_for(app, ("list_diaries", "list_diary_by_date_range"))
    app.add_record("diary entry", declared_loader("diary entry"))

    @app.tool("idempotent", identity="orchestrator", instance="instanceId")
    def write_diary(
        date: str,
        content: str,
        orchestrator: str | None = None,
        highlights: list[str] | None = None,
        blockers: list[str] | None = None,
        instanceId: str | None = None,
    ) -> str:
        """Write an orchestrator's diary entry for a `YYYY-MM-DD` date, replacing any there; returns its id."""
        who = orchestrator
        day = iso_date(date, "date")
        body = text(content, "content", max_bytes=MAX_CONTENT_BYTES)
        hi, bl = text_list(highlights, "highlights"), text_list(blockers, "blockers")
        inst = instanceId
        return db.write(
            lambda c: store.write_diary(
                c, date=day, orchestrator=who, content=body, highlights=hi, blockers=bl, instance_id=inst
            )
        )

    @app.tool("read", subject="orchestrator")
    def get_diary(date: str, orchestrator: str | None = None) -> dict[str, Any] | None:
        """Fetch a diary entry by orchestrator and `YYYY-MM-DD` date."""
        who = orchestrator
        day = iso_date(date, "date")
        return db.read(lambda c: store.get_diary(c, orchestrator=who, date=day))

    @app.tool("read")
    def list_diaries(
        orchestrator: str | None = None,
        from_: Annotated[str | None, Field(alias="from")] = None,
        to: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        fields: Fields = "full",
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """List diary entries newest date first, of one orchestrator or all, within `from`/`to`."""
        start = iso_date(from_, "from") if from_ is not None else None
        end = iso_date(to, "to") if to is not None else None
        if start is not None and end is not None and start > end:
            raise InvalidArgument(f"from ({start}) must be on or before to ({end})")
        return shape(db.read(
            lambda c: store.list_diaries(
                c, orchestrator=orchestrator, date_from=start, date_to=end, limit=limit, cursor=cursor,
                fields=fields,
            )
        ), detail, ENTRY, fields=fields)

    @app.tool("read")
    def list_diary_by_date_range(
        from_: Annotated[str, Field(alias="from")],
        to: str,
        orchestrator: str | None = None,
        limit: int | None = None,
        detail: Detail = "compact",
    ) -> list[dict[str, Any]]:
        """List diary entries from `from` to `to` inclusive, oldest first, as one array (`limit` 200, max 1000)."""
        start, end = iso_date(from_, "from"), iso_date(to, "to")
        if start > end:
            raise InvalidArgument(f"from ({start}) must be on or before to ({end})")
        size = clamp_limit(limit, store.RANGE_DEFAULT_LIMIT, store.RANGE_MAX_LIMIT)
        return shape(db.read(
            lambda c: store.list_by_date_range(c, date_from=start, date_to=end, orchestrator=orchestrator, limit=size)
        ), detail, ENTRY)

    @app.tool("destructive", identity="callerOrchestrator", owns=Owns("diary entry", "diaryId", action="delete"))
    def delete_diary(diaryId: str, callerOrchestrator: str | None = None) -> dict[str, bool]:
        """Delete a diary entry for good (owner or `system`); returns `{deleted}`."""
        return {"deleted": db.write(lambda c: store.DIARY.delete(c, diaryId))}
