"""MCP tools for briefing notes."""

from __future__ import annotations

from typing import Any

from ...core.compact import Compact, Detail, dense_text_for, shape
from ...core.envelope import cut
from ...core.errors import InvalidArgument
from ...core.validators import MAX_CONTENT_BYTES, MAX_FIELD_BYTES, require_query, text, text_list
from ...db.paging import Fields, check_fields, clamp_limit
from ...pipeline.app import App
from ...search.doctrine import with_doctrine
from . import store

# Spec §27.14: the VP-Sources doctrine follows these two descriptions verbatim.
LIST_BRIEFING_NOTES_TOOL_DESCRIPTION = with_doctrine("""List briefing notes newest first, by `topic` or `updatedSince` (`limit` 15 with full fields).""")
# Compact answers (core/compact.py).
NOTE = Compact(keys=("_id", "title", "topic"), text=("content",))

SEARCH_BRIEFING_NOTES_BY_KEYWORD_TOOL_DESCRIPTION = with_doctrine("""Search briefing notes (title, content, decisions) by keyword; every word must match.""")


def _changes(**fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("title", "topic"):
        if fields[key] is not None:
            out[key] = text(fields[key], key)
    if fields["content"] is not None:
        out["content"] = text(fields["content"], "content", max_bytes=MAX_CONTENT_BYTES)
    for key in ("participants", "decisions", "linkedMemoryIds"):
        if fields[key] is not None:
            out[key] = text_list(fields[key], key, max_bytes=MAX_FIELD_BYTES if key != "decisions" else 20_000)
    return out


def register(app: App) -> None:
    db = app.db
    dense_text_for(app, ("list_briefing_notes", "search_briefing_notes_by_keyword"))

    @app.tool("write", identity="createdBy", idempotent=True)
    def create_briefing_note(
        title: str,
        topic: str,
        participants: list[str],
        content: str,
        createdBy: str | None = None,
        decisions: list[str] | None = None,
        linkedMemoryIds: list[str] | None = None,
    ) -> str:
        """Create a briefing note (hand-off, meeting, decisions); returns its id.

        `topic` is a category key (`sprint-review`, `standup`…).
        """
        creator = createdBy
        values = _changes(title=title, topic=topic, participants=participants, content=content,
                          decisions=decisions, linkedMemoryIds=linkedMemoryIds)
        for key in ("title", "topic", "content", "participants"):
            if key not in values:
                raise InvalidArgument(f"{key} is required")
        return db.write(lambda c: store.create_note(c, values={**values, "createdBy": creator}))

    @app.tool("write", identity="callerOrchestrator")
    def update_briefing_note(
        noteId: str,
        callerOrchestrator: str | None = None,
        title: str | None = None,
        topic: str | None = None,
        participants: list[str] | None = None,
        content: str | None = None,
        decisions: list[str] | None = None,
        linkedMemoryIds: list[str] | None = None,
    ) -> None:
        """Change some fields of a briefing note (creator or `system`; caller required); returns null."""
        caller = callerOrchestrator
        changes = _changes(title=title, topic=topic, participants=participants, content=content,
                           decisions=decisions, linkedMemoryIds=linkedMemoryIds)
        if not changes:
            raise InvalidArgument("nothing to update: pass at least one of title, topic, participants, "
                                  "content, decisions, linkedMemoryIds")
        db.write(lambda c: store.update_note(c, note_id=noteId, caller=caller, changes=changes))
        return None

    @app.tool("read")
    def get_briefing_note(noteId: str) -> dict[str, Any] | None:
        """Fetch a briefing note by id with all its fields."""
        return db.read(lambda c: store.NOTES.get(c, noteId))

    @app.tool("read", description=LIST_BRIEFING_NOTES_TOOL_DESCRIPTION)
    def list_briefing_notes(
        topic: str | None = None,
        updatedSince: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        fields: Fields = "full",
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        projection = check_fields(fields)
        return shape(db.read(
            lambda c: store.list_notes(
                c, topic=topic, updated_since=updatedSince, limit=limit, cursor=cursor, fields=projection
            )
        ), detail, NOTE, fields=projection)

    @app.tool("read", description=SEARCH_BRIEFING_NOTES_BY_KEYWORD_TOOL_DESCRIPTION)
    def search_briefing_notes_by_keyword(
        query: str, topic: str | None = None, limit: int | None = None, detail: Detail = "compact"
    ) -> dict[str, Any]:
        words = require_query(query)
        size = clamp_limit(limit)
        return shape(cut(db.read(lambda c: store.search_notes(c, query=words, topic=topic, limit=size))), detail, NOTE)

    @app.tool("destructive", identity="callerOrchestrator")
    def delete_briefing_note(noteId: str, callerOrchestrator: str | None = None) -> dict[str, bool]:
        """Delete a briefing note for good (creator or `system`); returns `{deleted}`."""
        caller = callerOrchestrator
        return db.write(lambda c: store.delete_note(c, note_id=noteId, caller=caller))
