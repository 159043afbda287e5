"""Helpers shared by the tasks, missions and templates tests."""

from __future__ import annotations

from typing import Any


def call(tools, tool: str, args: dict[str, Any]) -> Any:
    return tools.call(tool, **args)


def error(tools, tool: str, args: dict[str, Any]) -> str:
    return tools.error(tool, **args)


def mission(tools, **over: Any) -> str:
    args = {"name": "M", "project": "p", "status": "plan", "priority": "high", "pilot": "sigma",
            "agents": ["sigma"], "createdBy": "pi", **over}
    return call(tools, "create_mission", args)


def task(tools, **over: Any) -> str:
    args = {"title": "a task", "assignedTo": "sigma", "priority": "high", "createdBy": "pi", **over}
    return tools.call("create_task", **args)


def page_all(tools, tool: str, **args: Any) -> list[dict[str, Any]]:
    """Follow nextCursor to the end; returns every item."""
    return tools.pages(tool, **args)[0]
