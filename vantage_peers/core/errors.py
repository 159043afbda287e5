"""Errors that reach the agent as `CODE: message`.

Every error a caller can cause is a `VantageError`. It subclasses the SDK's `ToolError`, so the
MCP layer hands its message to the agent verbatim (any other exception arrives only as
"Error executing tool X").
"""

from __future__ import annotations

from mcp.server.mcpserver.exceptions import ToolError


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
