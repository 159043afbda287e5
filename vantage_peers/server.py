"""create_server(settings) -> MCPServer with every domain's tools registered, in toolset order."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

from . import __version__
from .core import sdk
from .core.errors import VantageError
from .db import open_database
from .pipeline import deferred, idempotency, policy, prebuilt, toolsets
from .pipeline.app import App
from .pipeline.settings import Settings

INSTRUCTIONS = (
    "vantage-peers: shared memory, messages, tasks and missions for a team of agents, on one local "
    "SQLite file. Start a session with set_summary, check_messages, list_tasks and recall.\n"
    "Conventions for every tool (not repeated in each description): `from`, `createdBy`, "
    "`callerOrchestrator`, `recipient`, `requestedBy`, `orchestratorId` (profiles) and `orchestrator` "
    "(diary) default to the identity your access token carries (HTTP), else this server's VP_ORCHESTRATOR "
    "(instance ids to VP_INSTANCE_ID; see whoami); when an optional caller is absent, no RBAC check is "
    "made, and `system` bypasses RBAC. Times are Unix ms. list_* tools return {items, nextCursor?}: "
    "`limit` default 20, clamped to 1..200; pass `nextCursor` back as `cursor` until it is absent; "
    "`fields: \"lite\"` returns a compact projection. List and search items are compact by default (id, a "
    "few keys, a one-line `snippet`, `date`): `detail: \"full\"` returns whole documents, as get_* does. A `status` filter (tasks, missions) takes a status, a "
    "list, `open` (not finished), `active` (todo/in_progress; plan/execute) or `all`. get_* returns null for an unknown id; other verbs "
    "on an unknown id answer NOT_FOUND. Search queries are plain text (operators are literal); an "
    "answer is cut to 50,000 bytes (`truncated: true`). Unknown argument names are refused. "
    "Tools outside the enabled toolsets: list_toolsets, then enable_toolset."
)


class VantageServer(MCPServer):
    """MCPServer that lists only the tools of enabled toolsets (calls are checked by the pipeline)."""

    def __init__(self, app: App, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.vp_app = app
        sdk.announce_list_changed(self)

    async def list_tools(self):  # type: ignore[override]
        # From the app's tools (the ones this server was made with, in order), so that a tool of a
        # set that is off is not prepared at all (calls.PipelineTool: schemas are filled on first use).
        app = self.vp_app
        later = app.deferred  # read once: another thread may finish the registration meanwhile
        if later is not None and later.wanted(app):
            import anyio

            await anyio.to_thread.run_sync(app.complete_registration)
        # A copy, each name once: while deferred domains register in another thread (the scheduler's
        # first tick), a real tool is appended beside its placeholder, which lists the same.
        seen: set[str] = set()
        listed = []
        for tool in list(app.tools):
            if tool.name not in seen and toolsets.is_enabled(app, tool.name):
                seen.add(tool.name)
                listed.append(_lean_listing(tool.listing()))
        return listed


def _resource_policy(settings: Settings) -> Any:
    """Resource reads resolve their caller through the tools' policy.resolve (policy.resolve_resource):
    a credential without an identity is refused, another identity's inbox or task queue too (#32);
    memory rows a resource renders are narrowed by the store's namespace filter like any list."""
    from mcp.server.mcpserver.exceptions import ResourceError

    def check(uri: Any) -> None:
        try:
            policy.resolve_resource(str(uri), sdk.current_principal(), settings)
        except VantageError as exc:
            raise ResourceError(str(exc)) from None

    return check


def _lean_listing(tool: Any) -> Any:
    """Drop an output schema of just `{"type": "object"}`: it tells a client nothing, and the
    result still arrives as structuredContent."""
    return tool.model_copy(update={"output_schema": None}) if tool.output_schema == {"type": "object"} else tool


def domain_modules() -> list[str]:
    """Every `vantage_peers.domains.<name>` package that has a `tools` module, sorted (found on disk:
    find_spec would import every domain package, which deferring them is there to avoid)."""
    from . import domains

    names = []
    for info in pkgutil.iter_modules(domains.__path__):
        if info.ispkg and any((Path(path) / info.name / "tools.py").is_file() for path in domains.__path__):
            names.append(info.name)
    return sorted(names)


def register_domain(app: App, position: int, name: str) -> None:
    app.phase = (position, name)
    importlib.import_module(f"vantage_peers.domains.{name}.tools").register(app)
    app.phase = (position + 1, "")


def create_app(settings: Settings | None = None, *, serve: bool = True, lazy: bool = False) -> App:
    """The registry with every domain registered and, unless `serve` is false (reindex reads only the
    registry's corpora; `status` too, when its status_registry.json is unreadable), the MCP server
    composed on it. `lazy` (the stdio server) leaves the domains for later, listing their tools from
    the stored files (pipeline/deferred.py)."""
    settings = settings or Settings.from_env()
    db = open_database(settings)
    app = App(settings, db)
    toolsets.register(app)
    enabled = toolsets.initial_toolsets(app)
    names = domain_modules()
    known = deferred.manifest() if lazy else {}
    schemas = prebuilt.stored() if known else {}
    later = deferred.deferrable(names, enabled, known, schemas)
    for position, name in enumerate(names, start=1):
        if name not in later:
            register_domain(app, position, name)
    if later:
        app.deferred = deferred.Deferred(app, [(p, n) for p, n in enumerate(names, start=1) if n in later],
                                         register_domain, known, schemas)
    app.phase = (len(names) + 1, "")
    importlib.import_module("vantage_peers.prompts").register(app)  # the toolkit workflows as MCP prompts
    from .ui import register as register_ui  # ui:// resources and stream markers (not a tools domain)

    register_ui(app)
    toolsets.order_tools(app)  # list_toolsets / enable_toolset, then core, then the other sets
    app.enabled_toolsets = enabled
    app.add_job("idempotency-keys", lambda: app.db.write(idempotency.expire), every_seconds=3600)
    if not serve:
        return app
    app.mcp = VantageServer(app, name="vantage-peers", version=__version__, instructions=INSTRUCTIONS,
                            tools=app.tools)
    sdk.wrap_read_resource(app.mcp, _resource_policy(settings))
    for hook in app.server_hooks:
        hook(app.mcp)
    if app.deferred is not None:
        deferred.stand_in_handlers(app, app.mcp)  # the capabilities a full registration announces
    return app


def create_server(settings: Settings | None = None) -> MCPServer:
    return create_app(settings).mcp
