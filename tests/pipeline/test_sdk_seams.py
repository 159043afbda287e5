"""The SDK internals we lean on (vantage_peers/core/sdk.py and the Tool we subclass), pinned.

A release of the SDK that renames or removes one of these fails here, by name, instead of somewhere
in a call. Everything else reaches the SDK through its public API.
"""

from __future__ import annotations

import inspect

from mcp.server import stdio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool

from vantage_peers.core import sdk
from vantage_peers.pipeline.calls import PipelineTool


def test_private_stdio_helpers_exist_with_the_shape_we_call():
    for name in ("_claim_fd", "_open_stdin_diversion", "_open_stdout_diversion"):
        assert callable(getattr(stdio, name)), name
    assert len(inspect.signature(stdio._claim_fd).parameters) == 4  # (fd, stream, mode, open_diversion)


def test_context_streams_and_lowlevel_server():
    send, receive = sdk.create_context_streams[object](0)
    send.close()
    receive.close()
    server = MCPServer(name="pin")
    low = sdk.lowlevel(server)
    assert sdk.tool_manager(server).get_tool("nope") is None and isinstance(sdk.tool_manager(server)._tools, dict)
    assert callable(low.run) and callable(low.create_initialization_options)
    sdk.announce_list_changed(server)
    options = low.create_initialization_options()
    assert options.capabilities.tools is not None and options.capabilities.tools.list_changed is True


def test_resource_manager_and_read_resource_seams():
    server = MCPServer(name="pin")
    assert callable(server._resource_manager.add_template)
    assert inspect.iscoroutinefunction(server.read_resource)
    import anyio

    @server.resource("pin://x")
    def x() -> str:
        return "x"

    seen = []
    sdk.wrap_read_resource(server, seen.append)
    anyio.run(server.read_resource, "pin://x")
    assert seen == ["pin://x"]


def test_the_tool_we_subclass_keeps_its_contract():
    assert issubclass(PipelineTool, Tool)
    params = list(inspect.signature(Tool.run).parameters)
    assert params[:4] == ["self", "arguments", "context", "convert_result"]
    assert {"fn", "fn_metadata", "parameters", "name"} <= set(Tool.model_fields)
    assert hasattr(Tool, "from_function")


def test_the_auth_contextvar_reaches_us():
    assert sdk.current_principal() is None  # no request: stdio, in-process


def test_extension_and_handler_seams():
    server = MCPServer(name="pin")
    assert callable(server._apply_extension) and callable(server._install_extension_interceptor)
    low = sdk.lowlevel(server)
    entry = low.get_request_handler("tools/list")
    assert callable(entry.handler) and entry.params_type is not None
    assert callable(low.add_request_handler)
