"""core/errors.py takes the SDK's ToolError without importing the SDK (~0.5 s that every prompt's
`vantage-peers wait` hook paid): one class whichever is imported first, and the SDK still hands a
VantageError's text to the agent."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHECK = """
import sys
{first}
from vantage_peers.core.errors import InvalidArgument, VantageError
light = 'mcp' not in sys.modules
import mcp.server.mcpserver
from mcp.server.mcpserver import exceptions
from mcp.server.mcpserver.exceptions import ToolError
assert issubclass(InvalidArgument, ToolError), ToolError
assert exceptions.ToolError is ToolError is sys.modules['mcp.server.mcpserver.exceptions'].ToolError
print(light)
"""


@pytest.mark.parametrize(("first", "light"), [("", "True"), ("import mcp.server.mcpserver", "False")])
def test_one_tool_error_class_whichever_comes_first(first: str, light: str) -> None:
    out = subprocess.run([sys.executable, "-c", CHECK.format(first=first)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [light]


def test_the_wait_command_path_imports_no_sdk() -> None:
    """`vantage-peers wait` reads settings and waits (vantage_peers.wake): none of it needs the SDK."""
    code = ("import sys, vantage_peers.pipeline.settings, vantage_peers.wake, vantage_peers.core.errors; "
            "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "['mcp.server.mcpserver.exceptions']"


def test_a_vantage_error_still_reaches_the_agent_verbatim(tools) -> None:
    with pytest.raises(Exception, match="INVALID_ARGUMENT"):
        tools.call("send_message", channel="bob", content="")
