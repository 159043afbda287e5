"""Domains registered on first need rather than at start (#34: a stdio server answers `tools/list`
without importing any domain).

Importing (compiling) a domain costs more than building its tools, which prebuilt.py already
defers: a third of a cold start without cached bytecode. What start-up needs of the domains comes
from `domain_tools.json`, next to this module: each domain's tools in registration order, with their
toolset, description and annotations; their schemas come from prebuilt.py's `tool_schemas.json`. A
stdio server registers no domain at start. Each tool is a placeholder (`DeferredTool`) that lists
exactly as the real tool does, so `tools/list`, `list_toolsets` and `enable_toolset` read as before,
and a call of a tool whose set is off answers TOOLSET_DISABLED as before.

A domain registers more than tools (jobs, corpora, record loaders, task-done hooks, before-call and
presence hooks, resources, routes), so the deferred domains are registered, in their original order:

- those of the enabled toolsets before the first request that may need them: any tools/call (the
  pipeline's first stage) and, over stdio, any request but initialize, ping and tools/list
  (transport.py: resources, subscriptions, prompts);
- every one left the first time anything may need it: `enable_toolset` of a set that is off, the
  scheduler's first tick, a task completing (App.task_done), a call reaching a placeholder whose set
  came on another way, or a listing a placeholder cannot answer (no stored schema).

Only the stdio entry point defers (server.create_app(lazy=True)); `serve`, `status`, `doctor` and
`reindex` register every domain.

tests/pipeline/test_deferred.py checks the file against a full registration; after adding, renaming
or moving a tool, or changing its description or annotations, regenerate it:
`VP_UPDATE_SNAPSHOTS=1 uv run pytest -n 0 tests/pipeline/test_deferred.py`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp.server.mcpserver.tools import Tool
from mcp.types import Tool as MCPTool
from mcp.types import ToolAnnotations

from ..core import sdk
from ..core.errors import VantageError
from .host import Host as App
from .toolsets import check_enabled, ordered
from .toolsets import is_enabled as toolset_enabled

FILE = Path(__file__).with_name("domain_tools.json")


Entry = list[Any]  # [tool, toolset, description, annotations (a dict) or None]


def manifest() -> dict[str, list[Entry]]:
    """domain -> [entry, ...] in registration order ({} when the file is missing or unreadable)."""
    try:
        data = json.loads(FILE.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def generate(app: Any) -> dict[str, list[Entry]]:
    """The file's content, from an App on which every domain registered."""
    tools = {tool.name: tool for tool in app.tools}
    out: dict[str, list[Entry]] = {}
    for name in sorted(app.tool_order, key=app.tool_order.__getitem__):
        domain = app.tool_domain.get(name)
        if domain:
            tool = tools[name]
            hints = tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True) if tool.annotations else None
            out.setdefault(domain, []).append([name, app.toolset_of[name], tool.description, hints])
    return dict(sorted(out.items()))


def render(content: dict[str, list[Entry]]) -> str:
    return json.dumps(content, indent=1, ensure_ascii=False) + "\n"


def deferrable(domains: list[str], enabled: set[str], known: dict[str, list[Entry]],
               schemas: dict[str, Any]) -> set[str]:
    """The domains whose every tool is in a set that is off or can be listed without the domain (its
    schemas stored); a domain the file does not know is never deferred."""
    return {d for d in domains if known.get(d) and all(
        e[1] not in enabled or _listable(e, schemas) for e in known[d])}


def _listable(entry: Entry, schemas: dict[str, Any]) -> bool:
    return entry[0] in schemas


class DeferredTool(Tool):
    """A tool of a deferred domain: listed as the real tool is (from the two files), or, with no stored
    schema, only by name to list_toolsets (its set is off until the domain loads)."""

    def listing(self) -> Any:
        """This tool as tools/list shows it: what PipelineTool.listing gives of the real tool."""
        schemas = self.fn.vp_schemas  # type: ignore[attr-defined]
        return MCPTool(name=self.name, description=self.description, input_schema=schemas["parameters"],
                       output_schema=schemas["outputSchema"], annotations=self.annotations)

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        from .calls import refuse

        app: App = self.fn.vp_app  # type: ignore[attr-defined]
        try:
            check_enabled(app, self.name)
        except VantageError as exc:
            raise refuse(self.name, str(exc)) from None
        await register_enabled(app)  # its domain, and those of the other enabled sets
        real = sdk.tool_manager(app.mcp).get_tool(self.name)  # type: ignore[attr-defined]
        return await real.run(arguments, context, convert_result)


async def register_enabled(app: Any) -> None:
    """The deferred domains with a tool in an enabled set registered, off the event loop: before a
    request that may need their hooks, jobs or resources (a check of a few sets once none is left)."""
    later = app.deferred  # read once: another thread (the scheduler's tick) may finish meanwhile
    if later is not None and later.needs(app):
        import anyio

        await anyio.to_thread.run_sync(app.register_enabled)


def _placeholder(app: App, entry: Entry, schemas: dict[str, Any]) -> DeferredTool:
    def fn() -> None:  # never called: DeferredTool.run answers instead
        return None

    fn.vp_app = app  # type: ignore[attr-defined]
    fn.vp_schemas = schemas.get(entry[0]) if _listable(entry, schemas) else None  # type: ignore[attr-defined]
    name, _, description, hints = entry
    return DeferredTool.model_construct(fn=fn, name=name, description=description, parameters={"type": "object"},
                                        annotations=ToolAnnotations.model_validate(hints) if hints else None)


class Deferred:
    """The domains an App left out at start, and how to register them (server.register_domain)."""

    def __init__(self, app: App, domains: list[tuple[int, str]], register: Callable[[Any, int, str], None],
                 known: dict[str, list[Entry]], schemas: dict[str, Any]) -> None:
        self.domains = domains
        self.register = register
        self.known = known
        self.settled: frozenset[str] | None = None  # enabled sets none of whose domains is left (needs)
        self.lock = threading.Lock()
        for position, domain in domains:
            for entry in known[domain]:
                app.tools.append(_placeholder(app, entry, schemas))
                app.toolset_of[entry[0]] = entry[1]
                app.tool_order[entry[0]] = (position, len(app.tool_order))

    def holds(self, name: str) -> bool:
        """Whether the domain `name` is still deferred."""
        return any(domain == name for _, domain in self.domains)

    def _enabled(self, app: App, domain: str) -> bool:
        return any(e[1] in app.enabled_toolsets for e in self.known[domain])

    def needs(self, app: App) -> bool:
        """Whether a deferred domain has a tool in an enabled set (register_enabled would register
        something): cheap on every call once the answer is no for the sets enabled now."""
        if self.settled == app.enabled_toolsets:
            return False
        if any(self._enabled(app, d) for _, d in self.domains):
            return True
        self.settled = frozenset(app.enabled_toolsets)
        return False

    def wanted(self, app: App) -> bool:
        """A placeholder of an enabled set cannot list itself (no stored schema; its set came on other
        than by enable_toolset): load before listing."""
        return any(isinstance(t, DeferredTool) and t.fn.vp_schemas is None and toolset_enabled(app, t.name)
                   for t in app.tools)

    def load(self, app: Any, *, enabled_only: bool = False) -> None:
        """Register the deferred domains (only those with a tool in an enabled set: `enabled_only`)."""
        with self.lock:
            if app.deferred is not self:
                return  # loaded meanwhile by another thread
            now = [(p, d) for p, d in self.domains if not enabled_only or self._enabled(app, d)]
            if not now:
                return
            hooks, names = len(app.server_hooks), {e[0] for _, d in now for e in self.known[d]}
            for position, domain in now:  # appends the real tools after their placeholders
                self.register(app, position, domain)
            # One assignment: a concurrent listing sees either the placeholders or the real tools.
            app.tools[:] = ordered(app, [t for t in app.tools if not (isinstance(t, DeferredTool) and t.name in names)])
            app.in_registration_order()
            if app.mcp is not None:
                table = sdk.tool_manager(app.mcp)._tools
                for tool in app.tools:
                    table[tool.name] = tool
                for hook in app.server_hooks[hooks:]:
                    hook(app.mcp)
            self.domains = [entry for entry in self.domains if entry not in now]
            if not self.domains:
                app.deferred = None


# Handlers a deferred domain's server hook installs (messaging: the legacy resources/subscribe and
# unsubscribe), which decide what `initialize` announces (resources.subscribe): stood in for at start,
# so that a lazy server announces the same capabilities. The first such request registers the
# domains of the enabled sets and is handled by the real handler (over stdio the transport has
# registered them already).
def stand_in_handlers(app: Any, mcp: Any) -> None:
    import anyio
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    stand_ins = {"resources/subscribe": types.SubscribeRequestParams,
                 "resources/unsubscribe": types.UnsubscribeRequestParams}
    for method, params_type in stand_ins.items():
        if sdk.request_handler(mcp, method) is not None:
            continue

        async def handler(ctx: Any, params: Any, method: str = method) -> Any:
            for register in (app.register_enabled, app.complete_registration):
                await anyio.to_thread.run_sync(register)
                entry = sdk.request_handler(mcp, method)
                if entry is not None and entry.handler is not handler:
                    return await entry.handler(ctx, params)
            raise MCPError(code=types.METHOD_NOT_FOUND, message=f"{method} is not served")

        sdk.add_request_handler(mcp, method, params_type, handler)
