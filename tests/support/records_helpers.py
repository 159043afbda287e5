"""Helpers for the team-record tests (diary, briefings, components, mandates, business units)."""

from __future__ import annotations

from typing import Any

from conftest import Tools


def call(tools: Tools, tool: str, args: dict[str, Any]) -> Any:
    return tools.call(tool, **args)


def error(tools: Tools, tool: str, args: dict[str, Any]) -> str:
    return tools.error(tool, **args)


def search_hostile(tools: Tools, backend: str, tool: str, **args: Any) -> dict[str, Any] | None:
    """A search with a hostile query: its result, or None when PostgreSQL refused a NUL (U+0000) in it
    with INVALID_ARGUMENT (its text cannot hold one; SQLite's can). Any other error fails the test."""
    if backend == "postgres" and "\x00" in str(args.get("query", "")):
        try:
            return tools.call(tool, **args)
        except Exception as err:  # noqa: BLE001 - checked: only the coded NUL refusal is accepted
            assert "INVALID_ARGUMENT" in str(err) and "NUL" in str(err), err
            return None
    return tools.call(tool, **args)


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
