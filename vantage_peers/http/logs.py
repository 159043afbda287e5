"""Request ids and structured logs for `serve` (issue #31).

- `RequestIdMiddleware`: every HTTP request gets an id — the client's `X-Request-Id` when it is a
  short token (so a proxy's id carries through), else a new one — echoed in the response's
  `X-Request-Id` header and kept in a context variable for the log lines of that request.
- `VP_LOG_FORMAT=json`: `configure()` makes every log record one JSON object per line on stderr
  (`time`, `level`, `logger`, `message`, `requestId` when the line belongs to a request, `exc` with
  the traceback). The default (`text`) leaves logging as it was.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
import uuid
from datetime import UTC, datetime
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = b"x-request-id"
_ACCEPTED = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")  # what we echo: no spaces, quotes or control bytes
_REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("vp_request_id", default=None)


def current_request_id() -> str | None:
    return _REQUEST_ID.get()


def request_id_of(scope: Scope) -> str | None:
    """The id RequestIdMiddleware gave this request (set on the ASGI scope's state)."""
    state = scope.get("state") or {}
    return state.get("request_id") if isinstance(state, dict) else None


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = dict(scope.get("headers") or []).get(HEADER, b"").decode("latin-1")
        rid = sent if _ACCEPTED.match(sent) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = rid
        token = _REQUEST_ID.set(rid)

        async def with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != HEADER]
                message = {**message, "headers": [*headers, (HEADER, rid.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, with_id)
        finally:
            _REQUEST_ID.reset(token)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(), "logger": record.name, "message": record.getMessage()}
        rid = getattr(record, "request_id", None) or current_request_id()
        if rid:
            doc["requestId"] = rid
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False, default=str)


def log_format(environ: Any) -> str:
    value = (environ.get("VP_LOG_FORMAT") or "text").strip().lower()
    if value not in ("text", "json"):
        raise ValueError(f"VP_LOG_FORMAT must be text or json, not {value!r}")
    return value


def configure(fmt: str, level: int = logging.INFO) -> None:
    """JSON lines on stderr for every logger (uvicorn's included: its Config gets log_config=None)."""
    if fmt != "json":
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        named = logging.getLogger(name)
        named.handlers = []
        named.propagate = True
