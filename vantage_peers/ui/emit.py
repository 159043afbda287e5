"""`VP_EMIT_UI_MARKERS`: the six emitting tools (spec §26) append a stream marker to their result.

Registered as result hooks on the app (one post-processing step in the tool layer): the tool's
JSON text stays the first content block, untouched, and the marker follows as a second text block,
so a client that joins the text blocks (the consumer guide's pattern) finds it, and one that
parses the first block as JSON is unaffected.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mcp.types import CallToolResult, TextContent

from .markers import wrap_tool_result

log = logging.getLogger(__name__)

# Documented payload keys per kind, in order (everything else a tool returns stays out of the marker).
KEYS = {
    "tasks-table": ("_id", "title", "status", "priority", "assignedTo", "_creationTime"),
    "messages-feed": ("_id", "from", "channel", "content", "createdAt"),
    "diary-entry": ("_id", "date", "orchestrator", "content", "highlights", "blockers"),
    "mission-timeline": ("_id", "name", "project", "status", "pilot", "priority", "progress"),
    "briefing-note": ("_id", "topic", "title", "participants", "content", "createdBy"),
    "memory-quote": ("_id", "namespace", "type", "content", "score"),
}
# The canonical emitting tools (spec §26 "Chosen mapping onto canonical tools"): tool -> (kind, singular).
EMITTERS = {
    "list_tasks": ("tasks-table", False),
    "list_messages": ("messages-feed", False),
    "get_diary": ("diary-entry", True),
    "list_missions": ("mission-timeline", False),
    "get_briefing_note": ("briefing-note", True),
    "recall": ("memory-quote", False),
}


def project(kind: str, doc: dict[str, Any]) -> dict[str, Any]:
    out = {k: doc[k] for k in KEYS[kind] if doc.get(k) is not None}
    if "content" in KEYS[kind] and "content" not in out and isinstance(doc.get("snippet"), str):
        out["content"] = doc["snippet"]  # a compact item (issue 34): its one-line snippet is the card's text
    return out


def payload_for(tool: str, data: Any) -> dict[str, Any] | None:
    """The marker payload for a tool's structured result, or None when there is nothing to show."""
    kind, singular = EMITTERS[tool]
    if isinstance(data, dict) and set(data) == {"result"}:  # `dict | None` results are wrapped by the SDK
        data = data["result"]
    if not isinstance(data, dict):
        return None
    if singular:
        return {"kind": kind, "item": project(kind, data)}
    items = data.get("items")
    if not isinstance(items, list):
        return None
    return {"kind": kind, "items": [project(kind, d) for d in items if isinstance(d, dict)]}


def marker_hook(tool: str) -> Callable[[CallToolResult], CallToolResult]:
    def hook(result: CallToolResult) -> CallToolResult:
        if result.is_error:
            return result
        payload = payload_for(tool, result.structured_content)
        if payload is None:
            return result
        try:
            marker = wrap_tool_result(payload)
        except TypeError as err:
            # e.g. fields="lite" pages lack message content: the plain result is still correct.
            log.debug("no UI marker for %s: %s", tool, err)
            return result
        return result.model_copy(update={"content": [*result.content, TextContent(type="text", text=marker)]})

    return hook


def register_markers(app: Any) -> None:
    """Install the marker hooks when the settings enable them (VP_EMIT_UI_MARKERS=1|true)."""
    if not app.settings.emit_ui_markers:
        return
    for tool in EMITTERS:
        app.on_result(tool, marker_hook(tool))
