"""Domains registered on first need rather than at start (#34: `VP_TOOLSETS=core` starts faster).

A stdio server started with some toolsets off does not import the domains whose tools are all in
those sets: importing (compiling) a domain costs more than building its tools, which prebuilt.py
already defers. What start-up still needs of them comes from `domain_tools.json`, next to this
module: each domain's tools and their toolsets, in registration order. Their names are listed as
placeholders (`DeferredTool`), so `list_toolsets` and `enable_toolset` read as before and a call of
one answers TOOLSET_DISABLED as before.

A domain registers more than tools (jobs, corpora, record loaders, task-done hooks, routes, server
hooks), so every deferred domain is registered, all at once and in the original order, the first
time anything may need one: `enable_toolset` of a set that is off, the scheduler's first tick, a
task completing (App.task_done), or a call reaching a placeholder. Only the stdio entry point defers
(server.create_app(lazy=True)); `serve`, `status`, `doctor` and `reindex` register every domain.

tests/pipeline/test_deferred.py checks the file against a full registration; after adding, renaming
or moving a tool, regenerate it: `VP_UPDATE_SNAPSHOTS=1 uv run pytest -n 0 tests/pipeline/test_deferred.py`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp.server.mcpserver.tools import Tool

from ..core import sdk
from ..core.errors import VantageError
from .host import Host as App
from .toolsets import check_enabled, ordered

FILE = Path(__file__).with_name("domain_tools.json")


def manifest() -> dict[str, list[list[str]]]:
    """domain -> [[tool, toolset], ...] in registration order ({} when the file is missing or unreadable)."""
    try:
        data = json.loads(FILE.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def generate(app: Any) -> dict[str, list[list[str]]]:
    """The file's content, from an App on which every domain registered."""
    out: dict[str, list[list[str]]] = {}
    for name in sorted(app.tool_order, key=app.tool_order.__getitem__):
        domain = app.tool_domain.get(name)
        if domain:
            out.setdefault(domain, []).append([name, app.toolset_of[name]])
    return dict(sorted(out.items()))


def render(content: dict[str, list[list[str]]]) -> str:
    return json.dumps(content, indent=1) + "\n"


def deferrable(domains: list[str], enabled: set[str], known: dict[str, list[list[str]]]) -> set[str]:
    """The domains none of whose tools is in an enabled set (a domain the file does not know is never deferred)."""
    return {d for d in domains if known.get(d) and not any(ts in enabled for _, ts in known[d])}


class DeferredTool(Tool):
    """A tool of a deferred domain: listed by name to list_toolsets, never to tools/list (its set is off)."""

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        from .calls import refuse

        app: App = self.fn.vp_app  # type: ignore[attr-defined]
        try:
            check_enabled(app, self.name)
        except VantageError as exc:
            raise refuse(self.name, str(exc)) from None
        import anyio

        await anyio.to_thread.run_sync(app.complete_registration)  # its set came on another way
        real = sdk.tool_manager(app.mcp).get_tool(self.name)  # type: ignore[attr-defined]
        return await real.run(arguments, context, convert_result)


def _placeholder(app: App, name: str) -> DeferredTool:
    def fn() -> None:  # never called: DeferredTool.run answers instead
        return None

    fn.vp_app = app  # type: ignore[attr-defined]
    return DeferredTool.model_construct(fn=fn, name=name, description="", parameters={"type": "object"})


class Deferred:
    """The domains an App left out at start, and how to register them (server.register_domain)."""

    def __init__(self, app: App, domains: list[tuple[int, str]], register: Callable[[Any, int, str], None],
                 known: dict[str, list[list[str]]]) -> None:
        self.domains = domains
        self.register = register
        self.lock = threading.Lock()
        self.toolsets = {toolset for _, domain in domains for _, toolset in known[domain]}
        for position, domain in domains:
            for name, toolset in known[domain]:
                app.tools.append(_placeholder(app, name))
                app.toolset_of[name] = toolset
                app.tool_order[name] = (position, len(app.tool_order))

    def wanted(self, app: App) -> bool:
        """A set of a deferred domain is on (enabled other than by enable_toolset): load before listing."""
        return not self.toolsets.isdisjoint(app.enabled_toolsets)

    def load(self, app: Any) -> None:
        with self.lock:
            if app.deferred is not self:
                return  # loaded meanwhile by another thread
            hooks = len(app.server_hooks)
            for position, domain in self.domains:  # appends the real tools after their placeholders
                self.register(app, position, domain)
            # One assignment: a concurrent listing sees either the placeholders or the real tools.
            app.tools[:] = ordered(app, [t for t in app.tools if not isinstance(t, DeferredTool)])
            app.in_registration_order()
            if app.mcp is not None:
                table = sdk.tool_manager(app.mcp)._tools
                for tool in app.tools:
                    table[tool.name] = tool
                for hook in app.server_hooks[hooks:]:
                    hook(app.mcp)
            app.deferred = None
