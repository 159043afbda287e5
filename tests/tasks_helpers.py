"""Helpers shared by the tasks, missions and templates tests."""

from __future__ import annotations

import json
from typing import Any

from conftest import ToolError


def call(tools, tool: str, args: dict[str, Any]) -> Any:
    """Like `tools.call`, for argument names that clash with its own (`name`)."""
    result = tools.portal.call(tools.client.call_tool, tool, args)
    text = "\n".join(getattr(c, "text", "") for c in result.content)
    if result.is_error:
        raise ToolError(text)
    data = result.structured_content
    if data is None:
        return json.loads(text) if text else None
    return data["result"] if tool in tools._wrapped else data


def error(tools, tool: str, args: dict[str, Any]) -> str:
    try:
        call(tools, tool, args)
    except ToolError as exc:
        return str(exc)
    raise AssertionError(f"{tool} did not fail")


def mission(tools, **over: Any) -> str:
    args = {"name": "M", "project": "p", "status": "plan", "priority": "high", "pilot": "sigma",
            "agents": ["sigma"], "createdBy": "pi", **over}
    return call(tools, "create_mission", args)


def task(tools, **over: Any) -> str:
    args = {"title": "a task", "assignedTo": "sigma", "priority": "high", "createdBy": "pi", **over}
    return tools.call("create_task", **args)


def page_all(tools, tool: str, **args: Any) -> list[dict[str, Any]]:
    """Follow nextCursor to the end; returns every item."""
    items, cursor, pages = [], None, 0
    while True:
        page = tools.call(tool, **args, **({"cursor": cursor} if cursor else {}))
        items.extend(page["items"])
        pages += 1
        assert pages < 1000
        cursor = page.get("nextCursor")
        if cursor is None:
            assert "nextCursor" not in page
            return items
