"""create_server(settings) -> MCPServer with every domain's tools registered, in toolset order."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from mcp.server.lowlevel import NotificationOptions
from mcp.server.mcpserver import MCPServer

from . import __version__, toolsets
from .app import App
from .db import open_database
from .settings import Settings

INSTRUCTIONS = (
    "vantage-peers: shared memory, messages, tasks and missions for a team of agents, on one local "
    "SQLite file. Start a session with set_summary, check_messages, list_tasks and recall. "
    "Pass your orchestrator id as from/createdBy/callerOrchestrator unless whoami shows one configured."
)


class VantageServer(MCPServer):
    """MCPServer that lists and runs only the tools of enabled toolsets and announces list changes."""

    def __init__(self, app: App, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.vp_app = app
        low = self._lowlevel_server
        base = low.create_initialization_options

        def with_list_changed(notification_options: NotificationOptions | None = None, *args: Any, **kw: Any):
            # Handshake-era clients learn from this capability that enable_toolset may change the list.
            return base(notification_options or NotificationOptions(tools_changed=True), *args, **kw)

        low.create_initialization_options = with_list_changed  # type: ignore[method-assign]

    async def list_tools(self):  # type: ignore[override]
        return [_lean_listing(t) for t in await super().list_tools() if toolsets.is_enabled(self.vp_app, t.name)]

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None):  # type: ignore[override]
        from mcp.server.mcpserver.exceptions import ToolError

        try:
            toolsets.check_enabled(self.vp_app, name)
        except ToolError as exc:
            raise ToolError(f"Error executing tool {name}: {exc}") from None
        return await super().call_tool(name, arguments, context)


def _lean_listing(tool: Any) -> Any:
    """Drop what tells a client nothing: an output schema of just `{"type": "object"}` (the result
    still arrives as structuredContent) and `idempotentHint: false` (the protocol's default)."""
    update: dict[str, Any] = {}
    if tool.output_schema == {"type": "object"}:
        update["output_schema"] = None
    if tool.annotations is not None and tool.annotations.idempotent_hint is False:
        update["annotations"] = tool.annotations.model_copy(update={"idempotent_hint": None})
    return tool.model_copy(update=update) if update else tool


def domain_modules() -> list[str]:
    """Every `vantage_peers.domains.<name>` package that has a `tools` module, sorted."""
    from . import domains

    names = []
    for info in pkgutil.iter_modules(domains.__path__):
        if info.ispkg and importlib.util.find_spec(f"{domains.__name__}.{info.name}.tools") is not None:
            names.append(info.name)
    return sorted(names)


def create_app(settings: Settings | None = None) -> App:
    settings = settings or Settings.from_env()
    db = open_database(settings)
    app = App(settings, db)
    toolsets.register(app)
    for name in domain_modules():
        module = importlib.import_module(f"vantage_peers.domains.{name}.tools")
        module.register(app)
    toolsets.order_tools(app)  # list_toolsets / enable_toolset, then core, then the other sets
    app.enabled_toolsets = toolsets.initial_toolsets(app)
    app.mcp = VantageServer(app, name="vantage-peers", version=__version__, instructions=INSTRUCTIONS,
                            tools=app.tools)
    for hook in app.server_hooks:
        hook(app.mcp)
    return app


def create_server(settings: Settings | None = None) -> MCPServer:
    return create_app(settings).mcp
