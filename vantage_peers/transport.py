"""Our stdio transport: every JSON-RPC line gets an answer.

The SDK's stdio transport validates each line with pydantic's JSON parser; a line it cannot parse
(a lone surrogate `"\\ud800"`, arguments nested ~200 deep, plain garbage) is only logged, and the
client waits forever for its response. The SDK offers no hook for this, so this module reads the
lines itself:

- unparseable JSON → JSON-RPC error -32700, with the request id when one can be recovered;
- JSON that is not a valid JSON-RPC message → -32600 with its id;
- a `tools/call` whose arguments are nested deeper than `limits.MAX_DEPTH`, or a line larger than
  `limits.MAX_REQUEST_BYTES` → a tool result `INVALID_ARGUMENT: …` (isError), other methods -32600;
- lone surrogates are parsed by Python's `json` (they are valid JSON), so the request reaches the
  tools, whose own checks answer `INVALID_ARGUMENT`; replies holding one are written with
  `\\uXXXX` escapes instead of crashing the writer.
Everything else is handed to the SDK's server loop unchanged. Stdin/stdout are claimed the way the
SDK does (stray prints from tools go to stderr, not onto the wire).

Back-pressure (#19): the SDK starts a task per request and each finished reply waits, in memory,
until stdout takes it. A client that writes requests without reading replies (1,000 `tools/list`:
86 → 378 MiB) grew the process without bound. `_Window` admits at most `MAX_UNANSWERED` requests
that have been read but whose reply is not yet written to stdout; past that the reader stops
reading stdin (the client's writes then block in the pipe), so memory stays flat.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, BinaryIO

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from .core import limits
from .core.sdk import claim_stdin, claim_stdout, create_context_streams, lowlevel

MAX_UNANSWERED = 16  # requests read from stdin whose reply is not yet written

_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,18})')


def recover_id(line: bytes) -> str | int | None:
    """The request id of a line that could not be parsed, when its text shows one."""
    m = _ID.search(line[:65_536])
    if not m:
        return None
    raw = m.group(1)
    try:
        value = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return None
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


class _Window:
    """Requests read but not answered yet, bounded: `admit` waits while the window is full."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.pending: dict[tuple[str, Any], int] = {}
        self.count = 0
        self.changed = anyio.Condition()

    @staticmethod
    def key(request_id: Any) -> tuple[str, Any]:
        return type(request_id).__name__, request_id  # id 1 and id "1" are different requests

    async def admit(self, request_id: Any) -> None:
        async with self.changed:
            while self.count >= self.size:
                await self.changed.wait()
            key = self.key(request_id)
            self.pending[key] = self.pending.get(key, 0) + 1
            self.count += 1

    async def done(self, request_id: Any) -> None:
        """A reply for `request_id` was written (or the request was cancelled: no reply will come)."""
        key = self.key(request_id)
        async with self.changed:
            n = self.pending.get(key)
            if not n:
                return
            if n == 1:
                del self.pending[key]
            else:
                self.pending[key] = n - 1
            self.count -= 1
            self.changed.notify_all()


def _cancelled_id(message: Any) -> Any:
    """The request id a `notifications/cancelled` names (the SDK sends no reply to it), else None."""
    if isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
        params = message.params or {}
        return params.get("requestId") if isinstance(params, dict) else None
    return None


def error_line(request_id: Any, code: int, message: str) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def tool_error_line(request_id: Any, message: str) -> str:
    result = {"content": [{"type": "text", "text": message}], "isError": True}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})


def _valid_id(value: Any) -> str | int | None:
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


def triage(line: bytes) -> tuple[types.JSONRPCMessage | None, str | None]:
    """(message for the server, None) or (None, the reply line to write ourselves, or None to drop)."""
    if len(line) > limits.MAX_REQUEST_BYTES:
        rid = recover_id(line)
        msg = f"INVALID_ARGUMENT: the request is larger than {limits.MAX_REQUEST_BYTES} bytes"
        return None, tool_error_line(rid, msg) if rid is not None and b'"tools/call"' in line[:65_536] else \
            error_line(rid, types.INVALID_REQUEST, msg)
    try:
        data = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        return None, error_line(recover_id(line), types.PARSE_ERROR, f"Parse error: {type(exc).__name__}: "
                                f"{str(exc)[:200]}")
    rid = _valid_id(data.get("id")) if isinstance(data, dict) else None
    is_request = isinstance(data, dict) and "method" in data and "id" in data
    if limits.depth_exceeds(data, limits.MAX_DEPTH + 3):  # message → params → arguments → values
        if is_request and data.get("method") == "tools/call":
            return None, tool_error_line(rid, f"INVALID_ARGUMENT: {limits.depth_message()}")
        return None, error_line(rid, types.INVALID_REQUEST, f"Invalid request: {limits.depth_message()}")
    try:
        return types.jsonrpc_message_adapter.validate_python(data, by_name=False), None
    except Exception as exc:  # noqa: BLE001 - any validation failure is answered, never dropped
        if isinstance(data, dict) and "method" in data and "id" not in data:
            return None, None  # a malformed notification: JSON-RPC sends no reply to notifications
        return None, error_line(rid, types.INVALID_REQUEST, f"Invalid request: {str(exc)[:300]}")


def dump(message: types.JSONRPCMessage) -> str:
    try:
        return message.model_dump_json(by_alias=True, exclude_unset=True)
    except Exception:  # noqa: BLE001 - a lone surrogate in a reply: escape it rather than lose the reply
        return json.dumps(message.model_dump(mode="python", by_alias=True, exclude_unset=True),
                          ensure_ascii=True, default=str)


def _read_line(stream: BinaryIO) -> bytes:
    """One line, at most MAX_REQUEST_BYTES + 1 bytes kept (the rest of an oversize line is skipped)."""
    line = stream.readline(limits.MAX_REQUEST_BYTES + 1)
    if len(line) > limits.MAX_REQUEST_BYTES and not line.endswith(b"\n"):
        while True:
            rest = stream.readline(1 << 20)
            if not rest or rest.endswith(b"\n"):
                break
    return line


@asynccontextmanager
async def stdio_transport(stdin: BinaryIO | None = None, stdout: BinaryIO | None = None,
                          before: Callable[[types.JSONRPCMessage], Awaitable[None]] | None = None,
                          ) -> AsyncIterator[tuple[Any, Any]]:
    """(read_stream, write_stream) for the SDK's server loop, over stdin/stdout bytes; `before` is
    awaited with each message before the server sees it (in order: the next line waits)."""
    restore_in = restore_out = None
    try:
        if stdin is None:
            stdin, restore_in = claim_stdin()
        if stdout is None:
            stdout, restore_out = claim_stdout()
        read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
        write_stream, write_reader = create_context_streams[SessionMessage](0)
        lock = anyio.Lock()
        out = stdout
        window = _Window(MAX_UNANSWERED)

        async def emit(text: str) -> None:
            async with lock:  # whole lines only: our replies and the server's never interleave
                await anyio.to_thread.run_sync(_write, out, text)

        async def reader() -> None:
            try:
                async with read_writer:
                    while True:
                        line = await anyio.to_thread.run_sync(_read_line, stdin, abandon_on_cancel=True)
                        if not line:
                            break
                        if not line.strip():
                            continue
                        message, reply = triage(line)
                        if isinstance(message, types.JSONRPCRequest):
                            await window.admit(message.id)  # back-pressure: wait for replies to be written
                        if message is not None:
                            if before is not None:
                                await before(message)
                            await read_writer.send(SessionMessage(message))
                            cancelled = _cancelled_id(message)
                            if cancelled is not None:
                                await window.done(cancelled)
                        elif reply is not None:
                            await emit(reply)
            except anyio.ClosedResourceError:
                await anyio.lowlevel.checkpoint()

        async def writer() -> None:
            try:
                async with write_reader:
                    async for session_message in write_reader:
                        message = session_message.message
                        await emit(dump(message))
                        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                            await window.done(message.id)
            except anyio.ClosedResourceError:
                await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            yield read_stream, write_stream
    finally:
        if restore_out is not None:
            restore_out()
        if restore_in is not None:
            restore_in()


def _write(stream: BinaryIO, text: str) -> None:
    stream.write(text.encode("utf-8") + b"\n")
    stream.flush()


# Requests a stdio server answers before its domains are registered (pipeline/deferred.py): the
# handshake and the tool listing, which the stored files answer.
NEEDS_NO_DOMAIN = frozenset({"initialize", "ping", "tools/list", "server/discover", "prompts/list", "logging/setLevel"})


def _registering(app: Any) -> Callable[[types.JSONRPCMessage], Awaitable[None]] | None:
    """Before any other request, the deferred domains of the enabled sets are registered (their
    resources, subscriptions and hooks), off the event loop."""
    if app is None or getattr(app, "deferred", None) is None:
        return None

    from .pipeline.deferred import register_enabled

    async def before(message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCRequest) and message.method not in NEEDS_NO_DOMAIN:
            await register_enabled(app)

    return before


async def serve_stdio(mcp: Any, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """Run an MCPServer over our stdio transport (what `MCPServer.run("stdio")` does with the SDK's)."""
    server = lowlevel(mcp)
    before = _registering(getattr(mcp, "vp_app", None))
    async with stdio_transport(stdin, stdout, before) as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
