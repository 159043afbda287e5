"""Every use of the MCP SDK's private or patched internals, in one place.

The rest of the code reaches the SDK through its public API, or through the names below. Each one
is pinned by tests/pipeline/test_sdk_seams.py, which fails on an SDK release that removes or renames it, so
an upgrade breaks here, loudly, instead of somewhere in a call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, BinaryIO

from mcp.server import stdio as _sdk_stdio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.lowlevel import NotificationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared._context_streams import create_context_streams  # private: the streams the server loop reads

from .principal import Principal

__all__ = ["create_context_streams", "current_principal", "claim_stdin", "claim_stdout", "lowlevel",
           "announce_list_changed", "add_resource_template", "wrap_read_resource"]


def current_principal() -> Principal | None:
    """The verified token of the HTTP request this call belongs to (the bearer middleware puts it in
    the SDK's auth contextvar, and the SDK carries the request's context into the tool call)."""
    token = get_access_token()
    return token if isinstance(token, Principal) else None


def claim_stdin() -> tuple[BinaryIO, Callable[[], None]]:
    """fd 0 as a binary stream, diverted so that nothing else reads it (the SDK's stdio helper)."""
    import sys

    return _sdk_stdio._claim_fd(0, sys.stdin, "rb", _sdk_stdio._open_stdin_diversion)


def claim_stdout() -> tuple[BinaryIO, Callable[[], None]]:
    """fd 1 as a binary stream; stray prints go to stderr instead of corrupting the protocol."""
    import sys

    return _sdk_stdio._claim_fd(1, sys.stdout, "wb", _sdk_stdio._open_stdout_diversion)


def lowlevel(mcp: MCPServer) -> Any:
    """The low-level server under MCPServer (our stdio loop runs it with our own streams)."""
    return mcp._lowlevel_server


def tool_manager(mcp: MCPServer) -> Any:
    """The MCPServer's tool table (get_tool, and `_tools` by name): tools registered after the
    server was built (pipeline/deferred.py) go in there."""
    return mcp._tool_manager


def announce_list_changed(mcp: MCPServer) -> None:
    """Handshake-era clients learn from the `tools.listChanged` capability that enable_toolset may
    change the list; MCPServer offers no option for it, so its initialization options are wrapped."""
    low = lowlevel(mcp)
    base = low.create_initialization_options

    def with_list_changed(notification_options: NotificationOptions | None = None, *args: Any, **kw: Any) -> Any:
        return base(notification_options or NotificationOptions(tools_changed=True), *args, **kw)

    low.create_initialization_options = with_list_changed


def add_resource_template(mcp: MCPServer, **kwargs: Any) -> None:
    """A resource template whose variables are not Python names (`from`): `@mcp.resource` requires one
    parameter per variable, so the template goes to the resource manager directly."""
    mcp._resource_manager.add_template(**kwargs)


def wrap_read_resource(mcp: MCPServer, before: Callable[[Any], None]) -> None:
    """Run `before(uri)` ahead of every resources/read (MCPServer's handler calls this public method)."""
    original = mcp.read_resource

    async def read_resource(uri: Any, context: Any = None) -> Any:
        before(uri)
        return await original(uri, context)

    mcp.read_resource = read_resource  # type: ignore[method-assign]


def apply_extension(mcp: MCPServer, extension: Any) -> None:
    """What `MCPServer(extensions=[...])` does at construction, for an extension registered after it
    (the MCP Apps views register once the server is composed)."""
    mcp._apply_extension(extension)
    mcp._install_extension_interceptor()


def wrap_list_tools(mcp: MCPServer, wrap: Callable[[Any, Any, Any], Any]) -> None:
    """Replace the low-level `tools/list` handler by `wrap(plain, ctx, params)` (async), where `plain` is
    the handler it replaces: a listing that differs by client capability (MCP Apps links)."""
    low = lowlevel(mcp)
    entry = low.get_request_handler("tools/list")
    plain = entry.handler

    async def handler(ctx: Any, params: Any) -> Any:
        return await wrap(plain, ctx, params)

    low.add_request_handler("tools/list", entry.params_type, handler)


def add_request_handler(mcp: MCPServer, method: str, params_type: Any, handler: Callable[..., Any]) -> None:
    """Install (or replace) the low-level handler of one JSON-RPC method (resources/subscribe …)."""
    lowlevel(mcp).add_request_handler(method, params_type, handler)


def request_handler(mcp: MCPServer, method: str) -> Any:
    """The installed low-level handler entry of `method` (`.handler`, `.params_type`), or None."""
    return lowlevel(mcp)._request_handlers.get(method)


async def publish_subscription_event(mcp: MCPServer, event: Any) -> None:
    """Publish a notification to the 2026-07-28 `subscriptions/listen` streams of this server."""
    await mcp._subscriptions.publish(event)
