"""Errors that reach the agent as `CODE: message`.

Every error a caller can cause is a `VantageError`. It subclasses the SDK's `ToolError`, so the
MCP layer hands its message to the agent verbatim (any other exception arrives only as
"Error executing tool X").
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_SDK_ERRORS = "mcp.server.mcpserver.exceptions"


def _sdk_errors() -> object:
    """The SDK's exceptions module without importing the SDK: its package __init__ loads client and
    server (~0.5 s), which every hook's `vantage-peers wait` paid before each prompt. The module has no
    imports of its own; loaded by path under its own name, it is the one the SDK finds when it imports
    later, so `ToolError` is one class either way (tests/core/test_errors_import.py)."""
    if _SDK_ERRORS in sys.modules:
        return sys.modules[_SDK_ERRORS]
    top = importlib.util.find_spec("mcp")  # a top-level spec: found without running mcp/__init__
    path = Path(top.submodule_search_locations[0]) / "server" / "mcpserver" / "exceptions.py" if (
        top and top.submodule_search_locations) else None
    if path is None or not path.is_file():  # another SDK layout: the ordinary import
        import mcp.server.mcpserver.exceptions as module

        return module
    spec = importlib.util.spec_from_file_location(_SDK_ERRORS, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[_SDK_ERRORS] = module
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    except BaseException:
        del sys.modules[_SDK_ERRORS]
        raise
    return module


ToolError: type[Exception] = _sdk_errors().ToolError  # type: ignore[attr-defined]


class VantageError(ToolError):
    code = "ERROR"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        self.code = code or self.code
        self.detail = message
        super().__init__(f"{self.code}: {message}")


class NotFound(VantageError):
    code = "NOT_FOUND"


class InvalidArgument(VantageError):
    code = "INVALID_ARGUMENT"


class InvalidState(VantageError):
    code = "INVALID_STATE"


class Forbidden(VantageError):
    code = "RBAC_DENIED"


class Conflict(VantageError):
    code = "CONFLICT"


class Busy(VantageError):
    code = "BUSY"


class InternalError(VantageError):
    """An unexpected failure inside a tool: still answered with a code (the traceback goes to stderr)."""

    code = "INTERNAL_ERROR"
