"""`/metrics` of `serve` in the Prometheus text format (issue #31), with `prometheus-client`.

One `CollectorRegistry` per HTTP app (never the process-global one: a test process builds many
apps). What this process counts itself:
- tool calls, by tool, and errors by tool and code (`NOT_FOUND`, `RBAC_DENIED`, …), with a latency
  histogram — observed by an `MCPServer.middleware` entry, the SDK's public hook around every
  request, so the call pipeline is not touched;
- open SSE streams (any response of type `text/event-stream`: dashboard events, MCP GET streams);
- requests refused by the OAuth rate limits;
and what every replica shares, read from the database at scrape time (metrics_db.py).

Who may scrape: the master bearer (`Authorization: Bearer <BEARER_SECRET_MASTER>`), or anyone when
`serve` is bound to loopback, `PUBLIC_BASE_URL` is unset or loopback too, and the request did not
come through a proxy (no `Forwarded` / `X-Forwarded-For`): a proxy in front of a loopback bind
would otherwise publish the page.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlparse

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .logs import current_request_id, request_id_of
from .tokens import same

log = logging.getLogger("vantage_peers.http.calls")
LOOPBACK = ("127.0.0.1", "localhost", "::1")
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
OTHER_TOOL = "_unknown"  # a name no tool has: one label, so a client cannot mint series at will
_CODE = re.compile(r"^(?:Error executing tool \S+: )?([A-Z][A-Z0-9_]{2,40}):")


def error_code(text: str) -> str:
    """The code an error answer starts with (`CODE: …`, after the SDK's prefix), else `ERROR`."""
    found = _CODE.match(text or "")
    return found.group(1) if found else "ERROR"


def _result_error(result: Any) -> str | None:
    """The error text of a tools/call result (a wire dict or a model), None when it succeeded."""
    if isinstance(result, dict):
        if not result.get("isError"):
            return None
        content = result.get("content") or []
        return " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    if getattr(result, "is_error", False):
        return " ".join(str(getattr(c, "text", "")) for c in getattr(result, "content", []) or [])
    return None


class Metrics:
    """The registry of one HTTP app and the instruments this process updates."""

    def __init__(self, tools: Iterable[str]) -> None:
        self.registry = CollectorRegistry()
        self.tools = frozenset(tools)
        r = self.registry
        self.calls = Counter("vp_tool_calls", "Tool calls answered (success or error), by tool", ["tool"],
                             registry=r)
        self.errors = Counter("vp_tool_errors", "Tool calls answered with an error, by tool and error code",
                              ["tool", "code"], registry=r)
        self.latency = Histogram("vp_tool_call_duration_seconds", "Time to answer a tool call, by tool", ["tool"],
                                 buckets=BUCKETS, registry=r)
        self.sse_open = Gauge("vp_sse_streams_open", "SSE responses (text/event-stream) open now in this process",
                              registry=r)
        self.rate_limited = Counter("vp_http_rate_limited", "Requests refused by an OAuth rate limit or the "
                                    "failed-login back-off (429), by endpoint", ["endpoint"], registry=r)


    def label(self, tool: Any) -> str:
        return tool if isinstance(tool, str) and tool in self.tools else OTHER_TOOL

    async def observe_call(self, ctx: Any, call_next: Any) -> Any:
        """`MCPServer.middleware` entry: count and time every tools/call."""
        if getattr(ctx, "method", None) != "tools/call":
            return await call_next(ctx)
        params = ctx.params if isinstance(getattr(ctx, "params", None), Mapping) else {}
        tool = self.label(params.get("name"))
        started = time.perf_counter()
        try:
            result = await call_next(ctx)
        except Exception:  # a protocol-level failure (unknown tool, malformed params): a JSON-RPC error
            self._record(tool, started, "PROTOCOL_ERROR")
            raise
        text = _result_error(result)
        code = error_code(text) if text is not None else None
        self._record(tool, started, code)
        if code is None:
            return result
        rid = _request_id(ctx)
        if code != "INTERNAL_ERROR":  # one line per refused call, with its request id
            log.info("tool %s answered %s", tool, code, extra={"request_id": rid})
        else:  # the traceback went to stderr: let the agent quote this line's id
            log.error("tool %s failed unexpectedly: %s", tool, text, extra={"request_id": rid})
            if rid and isinstance(result, dict):
                result = _with_request_id(result, rid)
        return result

    def _record(self, tool: str, started: float, code: str | None) -> None:
        self.latency.labels(tool).observe(time.perf_counter() - started)
        self.calls.labels(tool).inc()
        if code is not None:
            self.errors.labels(tool, code).inc()


Metrics.observe_call.vp_metrics = True  # type: ignore[attr-defined]  # how asgi.py finds (and replaces) it


def _request_id(ctx: Any) -> str | None:
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None)
    return (request_id_of(scope) if isinstance(scope, dict) else None) or current_request_id()


def _with_request_id(result: dict[str, Any], rid: str) -> dict[str, Any]:
    content = [dict(c) for c in result.get("content") or []]
    for item in content:
        if item.get("type") == "text":
            item["text"] = f"{item.get('text', '')} (request id {rid})"
            break
    return {**result, "content": content}


class SseStreams:
    """ASGI middleware: `vp_sse_streams_open` up while a text/event-stream response is open."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.gauge = metrics.sse_open

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        streaming = False

        async def watch(message: Message) -> None:
            nonlocal streaming
            if message["type"] == "http.response.start":
                kind = dict(message.get("headers") or []).get(b"content-type", b"")
                if kind.startswith(b"text/event-stream"):
                    streaming = True
                    self.gauge.inc()
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            if streaming:
                self.gauge.dec()


def loopback_only(host: str, public_base_url: str | None) -> bool:
    """Bound to loopback and published nowhere else: /metrics needs no secret."""
    if host not in LOOPBACK:
        return False
    return not public_base_url or (urlparse(public_base_url).hostname or "") in LOOPBACK


def metrics_endpoint(metrics: Metrics, collectors: Iterable[Any], *, master: str | None, open_locally: bool) -> Any:
    for collector in collectors:
        metrics.registry.register(collector)

    async def handle(request: Request) -> Response:
        header = request.headers.get("authorization", "")
        presented = header[7:].strip() if header.lower().startswith("bearer ") else ""
        proxied = "forwarded" in request.headers or "x-forwarded-for" in request.headers
        if not ((master and presented and same(presented, master)) or (open_locally and not proxied)):
            status = 403 if presented else 401
            return JSONResponse({"error": "forbidden" if presented else "unauthorized",
                                 "error_description": "/metrics needs Authorization: Bearer <BEARER_SECRET_MASTER> "
                                                      "(or serve bound to loopback only)"},
                                status_code=status, headers={"WWW-Authenticate": "Bearer"})
        import anyio.to_thread

        body = await anyio.to_thread.run_sync(generate_latest, metrics.registry)  # the DB reads block
        return Response(body, media_type=CONTENT_TYPE_LATEST, headers={"Cache-Control": "no-store"})

    return handle
