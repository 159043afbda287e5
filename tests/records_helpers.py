"""Helpers for the team-record tests (diary, briefings, components, mandates, business units)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import ToolError, Tools


def call(tools: Tools, tool: str, args: dict[str, Any]) -> Any:
    """Like `tools.call`, for argument names that clash with its own (`name`)."""
    result = tools.portal.call(tools.client.call_tool, tool, args)
    text = "\n".join(getattr(c, "text", "") for c in result.content)
    if result.is_error:
        raise ToolError(text)
    data = result.structured_content
    if data is None:
        return json.loads(text) if text else None
    return data["result"] if tool in tools._wrapped else data


def error(tools: Tools, tool: str, args: dict[str, Any]) -> str:
    with pytest.raises(ToolError) as info:
        call(tools, tool, args)
    return str(info.value)


def page_all(tools: Tools, tool: str, **args: Any) -> tuple[list[dict[str, Any]], int]:
    """Follow nextCursor to the end; returns (all items, number of pages)."""
    items: list[dict[str, Any]] = []
    pages, cursor = 0, None
    while True:
        page = call(tools, tool, {**args, **({"cursor": cursor} if cursor else {})})
        assert "nextCursor" not in page or page["nextCursor"], "nextCursor must be absent, not null/empty"
        items.extend(page["items"])
        pages += 1
        cursor = page.get("nextCursor")
        if not cursor:
            return items, pages
        assert pages < 10_000


HOSTILE_QUERIES = [
    '"', '""', "AND OR NOT", "col:x*", "(((", "NEAR(", "NEAR(a b, 2)", "*", "^start", "a OR", "-x", "x'; DROP TABLE",
    "🙂🚀", "\u0000", "a\u0000b", "abc\u0000def \u0000xyz", "   ", "title:foo", "{a b}", "a + b",
]


def insert_memory(app, memory_id: str, content: str = "a memory") -> None:
    """Insert a memory row directly (the memory tools live on another branch)."""
    app.db.write(lambda c: c.execute(
        "INSERT INTO memories (id, namespace, type, content, createdBy, createdAt, updatedAt) "
        "VALUES (?, 'global', 'fact', ?, 'test', 1, 1)", (memory_id, content),
    ))
