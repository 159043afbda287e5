"""Helpers for the team-record tests (diary, briefings, components, mandates, business units)."""

from __future__ import annotations

from typing import Any

from conftest import Tools


def call(tools: Tools, tool: str, args: dict[str, Any]) -> Any:
    return tools.call(tool, **args)


def error(tools: Tools, tool: str, args: dict[str, Any]) -> str:
    return tools.error(tool, **args)


def page_all(tools: Tools, tool: str, **args: Any) -> tuple[list[dict[str, Any]], int]:
    """Follow nextCursor to the end; returns (all items, number of pages)."""
    return tools.pages(tool, **args)


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
