"""Generative UI (spec §25-26): the six `ui://vp/v1/<primitive>` resources, the stream markers, and
the same views as MCP Apps (`ui://vp/v1/app/<primitive>`)."""

from __future__ import annotations

from typing import Any

from .markers import MARKER_END, MARKER_START, parse_tool_result, wrap_tool_result

__all__ = ["MARKER_START", "MARKER_END", "parse_tool_result", "wrap_tool_result", "register"]


def register(app: Any) -> None:
    """Install the marker result hooks (when enabled), the resources once the server exists, and the
    same six views as MCP Apps (apps.py)."""
    from .apps import register as register_apps
    from .emit import register_markers
    from .resources import register_resources

    register_markers(app)
    app.on_server(lambda mcp: register_resources(app, mcp))
    register_apps(app)
