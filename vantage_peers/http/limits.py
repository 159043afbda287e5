"""Limits on the anonymous OAuth endpoints: what a registration may hold, and how often an address
may register, ask for tokens, or fail client authentication.

- `metadata_problem(raw)`: caps on every RFC 7591 client metadata field (name ≤ 200 chars, ≤ 10
  redirect URIs of ≤ 2,000 chars, …) and the redirect URI rule (`redirect_uri_problem`), checked
  before anything is validated further or stored;
- `RateLimit`: ASGI middleware around one endpoint: a token bucket per client IP (in memory, per
  process: several `serve` workers each allow the rate), plus — on the token endpoint — a backoff
  after failed client authentication (every 401 doubles the lock-out, 1 s … 5 min, reset by a
  success). Over either: `429` with `Retry-After` and an OAuth-style JSON error.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import OrderedDict
from typing import Any
from urllib.parse import urlsplit

MAX_REGISTRATION_BYTES = 16 * 1024
MAX_NAME = 200
MAX_REDIRECT_URIS = 10
MAX_URI = 2000
MAX_LIST = 10
MAX_SHORT = 200    # software_id, software_version, token_endpoint_auth_method, grant/response types
MAX_SCOPE = 1000
MAX_CONTACT = 320
URI_FIELDS = ("client_uri", "logo_uri", "tos_uri", "policy_uri", "jwks_uri")
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
# Schemes a redirect must never use: script, inline data, local files, browser internals.
FORBIDDEN_SCHEMES = frozenset({"javascript", "vbscript", "data", "file", "blob", "about", "filesystem",
                               "view-source", "jar", "mhtml", "ws", "wss", "ftp"})
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*$")


def redirect_uri_problem(uri: Any) -> str | None:
    """Why `uri` may not be a redirect URI, or None: `https://…`, `http://` on a loopback host, or a
    private-use scheme (`com.example.app:/cb`, RFC 8252 §7.1) — never script/data/file schemes."""
    if not isinstance(uri, str) or not uri:
        return "each redirect URI must be a non-empty string"
    if len(uri) > MAX_URI:
        return f"a redirect URI is longer than {MAX_URI} characters"
    if any(ord(c) < 0x21 or c == "\x7f" for c in uri):
        return "a redirect URI may not contain spaces or control characters"
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return f"redirect URI {uri[:100]!r} is not a valid URI"
    scheme = parts.scheme.lower()
    if not scheme or not _SCHEME.match(scheme):
        return f"redirect URI {uri[:100]!r} has no valid scheme"
    if parts.fragment or "#" in uri:
        return "a redirect URI may not have a fragment (RFC 6749 §3.1.2)"
    if scheme in FORBIDDEN_SCHEMES:
        return f"redirect URI scheme {scheme!r} is not allowed (use https://, http:// on loopback, or a private-use scheme)"
    if scheme == "https":
        return None if parts.hostname else f"redirect URI {uri[:100]!r} has no host"
    if scheme == "http":
        if (parts.hostname or "").lower() in LOOPBACK and "@" not in parts.netloc:
            return None
        return "http:// redirect URIs are allowed only on loopback (127.0.0.1, localhost, [::1]); use https://"
    if parts.netloc and "@" in parts.netloc:
        return "a redirect URI may not carry user info"
    return None  # a private-use scheme


def _text_problem(raw: dict[str, Any], field: str, cap: int) -> str | None:
    value = raw.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        return f"{field} must be a string"
    if len(value) > cap:
        return f"{field} is longer than {cap} characters"
    return None


def _list_problem(raw: dict[str, Any], field: str, count: int, cap: int) -> str | None:
    value = raw.get(field)
    if value is None:
        return None
    if not isinstance(value, list):
        return f"{field} must be an array"
    if len(value) > count:
        return f"{field} may hold at most {count} entries"
    if any(not isinstance(v, str) or len(v) > cap for v in value):
        return f"each entry of {field} must be a string of at most {cap} characters"
    return None


def metadata_problem(raw: dict[str, Any]) -> str | None:
    """The first cap a registration request breaks, or None."""
    checks = [_text_problem(raw, "client_name", MAX_NAME),
              _list_problem(raw, "redirect_uris", MAX_REDIRECT_URIS, MAX_URI),
              _list_problem(raw, "grant_types", MAX_LIST, MAX_SHORT),
              _list_problem(raw, "response_types", MAX_LIST, MAX_SHORT),
              _list_problem(raw, "contacts", MAX_LIST, MAX_CONTACT),
              _text_problem(raw, "scope", MAX_SCOPE),
              *(_text_problem(raw, f, MAX_SHORT) for f in ("software_id", "software_version",
                                                           "token_endpoint_auth_method")),
              *(_text_problem(raw, f, MAX_URI) for f in URI_FIELDS)]
    for problem in checks:
        if problem:
            return problem
    for uri in raw.get("redirect_uris") or []:
        problem = redirect_uri_problem(uri)
        if problem:
            return problem
    for field, value in raw.items():  # fields we do not know are kept by the SDK model: cap them too
        if len(json.dumps(value, default=str)) > MAX_URI * 2:
            return f"{field} is too large"
    return None


class Buckets:
    """Token buckets keyed by client address: `burst` requests at once, refilled at `per_minute`.
    At most `max_keys` addresses are tracked (least recently seen dropped): memory stays bounded."""

    def __init__(self, per_minute: float, burst: int, max_keys: int = 10_000) -> None:
        self.rate = per_minute / 60.0
        self.burst = float(burst)
        self.max_keys = max_keys
        self._state: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: str, now: float | None = None) -> float | None:
        """Spend one token; None when allowed, else the seconds until one is available."""
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, at = self._state.pop(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - at) * self.rate)
            if tokens >= 1:
                self._state[key] = (tokens - 1, now)
                wait = None
            else:
                self._state[key] = (tokens, now)
                wait = (1 - tokens) / self.rate if self.rate > 0 else 3600.0
            while len(self._state) > self.max_keys:
                self._state.popitem(last=False)
            return wait


class FailureBackoff:
    """After `free` failed client authentications from one address, each further failure locks the
    address out for 1 s, 2 s, 4 s … up to `max_seconds`; a success clears it."""

    def __init__(self, free: int = 5, max_seconds: float = 300.0, max_keys: int = 10_000) -> None:
        self.free = free
        self.max_seconds = max_seconds
        self.max_keys = max_keys
        self._state: OrderedDict[str, tuple[int, float]] = OrderedDict()  # key -> (failures, locked until)
        self._lock = threading.Lock()

    def locked(self, key: str, now: float | None = None) -> float | None:
        now = time.monotonic() if now is None else now
        with self._lock:
            _, until = self._state.get(key, (0, 0.0))
            return until - now if until > now else None

    def failed(self, key: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            failures, _ = self._state.pop(key, (0, 0.0))
            failures += 1
            over = failures - self.free
            until = now + min(self.max_seconds, 2.0 ** (over - 1)) if over > 0 else 0.0
            self._state[key] = (failures, until)
            while len(self._state) > self.max_keys:
                self._state.popitem(last=False)

    def succeeded(self, key: str) -> None:
        with self._lock:
            self._state.pop(key, None)


def client_ip(scope: dict[str, Any]) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def too_many(wait: float, what: str) -> tuple[dict[str, Any], list[tuple[bytes, bytes]]]:
    seconds = max(1, math.ceil(wait))
    body = {"error": "too_many_requests", "error_description": f"RATE_LIMITED: too many {what} from this address; "
                                                               f"retry after {seconds} s"}
    return body, [(b"retry-after", str(seconds).encode())]


def limiters(register_per_minute: float, token_per_minute: float) -> dict[str, Any]:
    """The buckets of one `serve` process: registration per address and overall, token per address."""
    return {"register": Buckets(register_per_minute, burst=max(1, int(register_per_minute))),
            "register_overall": Buckets(register_per_minute * 4, burst=max(1, int(register_per_minute * 4))),
            "token": Buckets(token_per_minute, burst=max(1, int(token_per_minute))),
            "backoff": FailureBackoff()}


class RateLimit:
    """ASGI middleware for one OAuth endpoint (see the module docstring)."""

    def __init__(self, app: Any, *, buckets: Buckets, what: str, backoff: FailureBackoff | None = None,
                 overall: Buckets | None = None) -> None:
        self.app = app
        self.buckets = buckets
        # One bucket for every address together: uvicorn trusts X-Forwarded-For from loopback, so a
        # local caller can pose as any number of addresses; this caps the endpoint as a whole.
        self.overall = overall
        self.what = what
        self.backoff = backoff

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") == "OPTIONS":
            await self.app(scope, receive, send)
            return
        ip = client_ip(scope)
        wait = self.backoff.locked(ip) if self.backoff else None
        what = "failed client authentications" if wait else self.what
        if wait is None:
            wait = self.buckets.take(ip)
        if wait is None and self.overall is not None:
            wait = self.overall.take("*")
        if wait is not None:
            await _reply_429(send, *too_many(wait, what))
            return
        if self.backoff is None:
            await self.app(scope, receive, send)
            return
        backoff = self.backoff

        async def watch(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                if message["status"] == 401:  # invalid_client: a wrong or missing secret
                    backoff.failed(ip)
                elif message["status"] < 400:
                    backoff.succeeded(ip)
            await send(message)

        await self.app(scope, receive, watch)


async def _reply_429(send: Any, body: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": 429, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
        (b"cache-control", b"no-store"), *headers]})
    await send({"type": "http.response.body", "body": data})
