"""create_server(settings) -> MCPServer with every domain's tools registered."""

from __future__ import annotations

import importlib
import pkgutil

from mcp.server.mcpserver import MCPServer

from . import __version__
from .app import App
from .db import open_database
from .settings import Settings

INSTRUCTIONS = (
    "vantage-peers: shared memory, messages, tasks and missions for a team of agents, on one local "
    "SQLite file. Start a session with set_summary, check_messages, list_tasks and recall. "
    "Pass your orchestrator id as from/createdBy/callerOrchestrator unless whoami shows one configured."
)


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
    for name in domain_modules():
        module = importlib.import_module(f"vantage_peers.domains.{name}.tools")
        module.register(app)
    importlib.import_module("vantage_peers.prompts").register(app)  # the toolkit workflows as MCP prompts
    from .ui import register as register_ui  # ui:// resources and stream markers (not a tools domain)

    register_ui(app)
    app.mcp = MCPServer(name="vantage-peers", version=__version__, instructions=INSTRUCTIONS, tools=app.tools)
    for hook in app.server_hooks:
        hook(app.mcp)
    return app


def create_server(settings: Settings | None = None) -> MCPServer:
    return create_app(settings).mcp
