"""DNS-rebinding protection for `/mcp` on a loopback bind, by parsing, never by prefix.

The SDK's check admits an `Origin` (or `Host`) that merely *starts with* an allowed value plus a
colon, so `Origin: http://127.0.0.1:1@evil.example` — a page on evil.example — passed as loopback.
This middleware runs in front of the SDK's: it parses `Origin` as a URL and `Host` as
`host[:port]` and compares the parts. An origin is allowed when it is exactly `scheme://host[:port]`
(no user info, path, query or fragment) and is either `http` on a loopback host (any port) or
the origin of PUBLIC_BASE_URL. A missing `Origin` is allowed (non-browser clients send none).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
_HOST = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9.-]+))(?::(?P<port>\d{1,5}))?$")


def _default_port(scheme: str) -> int | None:
    return {"http": 80, "https": 443}.get(scheme)


def parse_origin(value: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of a serialized origin, or None when it is not exactly one."""
    if not value or any(c.isspace() for c in value) or "@" in value:
        return None
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname or parts.username is not None:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment or value.endswith("?") or "#" in value:
        return None
    port = port if port is not None else _default_port(scheme)
    if port is None or not 0 < port < 65536:
        return None
    return scheme, parts.hostname.lower(), port


def parse_host(value: str) -> str | None:
    """The host name of a `Host` header (`name[:port]` or `[v6][:port]`), or None when malformed."""
    m = _HOST.match(value or "")
    if not m or (m.group("port") and not 0 < int(m.group("port")) < 65536):
        return None
    return (m.group("v6") or m.group("name")).lower()


class OriginCheck:
    """ASGI middleware: 421 for a foreign Host, 403 for a foreign Origin, on `paths` only."""

    def __init__(self, app: Any, *, public_base_url: str, paths: tuple[str, ...] = ("/mcp",)) -> None:
        self.app = app
        self.paths = paths
        public = parse_origin(public_base_url.rstrip("/"))
        self.public_origin = public
        self.hosts = set(LOOPBACK_NAMES) | ({public[1]} if public else set())

    def origin_allowed(self, value: str | None) -> bool:
        if value is None:
            return True
        parsed = parse_origin(value)
        if parsed is None:
            return False
        scheme, host, _port = parsed
        return (scheme == "http" and host in LOOPBACK_NAMES) or parsed == self.public_origin

    def host_allowed(self, value: str | None) -> bool:
        return value is not None and parse_host(value) in self.hosts

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path") in self.paths:
            headers = Headers(scope=scope)
            response = None
            if not self.host_allowed(headers.get("host")):
                response = PlainTextResponse("Invalid Host header", status_code=421)
            elif not self.origin_allowed(headers.get("origin")):
                response = PlainTextResponse("Invalid Origin header", status_code=403)
            if response is not None:
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
