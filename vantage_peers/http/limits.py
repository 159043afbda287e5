"""Limits on the anonymous OAuth endpoints: what a registration may hold, and how often an address
may register, ask for tokens, or fail client authentication.

- `metadata_problem(raw)`: caps on every RFC 7591 client metadata field (name ≤ 200 chars, ≤ 10
  redirect URIs of ≤ 2,000 chars, …) and the redirect URI rule (`redirect_uri_problem`), checked
  before anything is validated further or stored;
- `RateLimit`: ASGI middleware around one endpoint: token buckets per client address (and for all
  addresses together), plus — on the token endpoint — a backoff after failed client authentication
  (every 401 doubles the lock-out, 1 s … 5 min, reset by a success). Over either: `429` with
  `Retry-After` and an OAuth-style JSON error. The state is in the database (shared_limits.py): every
  worker and replica spends one budget (issue #31). The client address is the TCP peer, or what a
  trusted proxy says (proxies.py, `VP_TRUSTED_PROXIES`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread

from .shared_limits import Bucket, LimitStore, bucket

log = logging.getLogger("vantage_peers.http.limits")

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


def client_ip(scope: dict[str, Any]) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def too_many(wait: float, what: str) -> tuple[dict[str, Any], list[tuple[bytes, bytes]]]:
    seconds = max(1, math.ceil(wait))
    body = {"error": "too_many_requests", "error_description": f"RATE_LIMITED: too many {what} from this address; "
                                                               f"retry after {seconds} s"}
    return body, [(b"retry-after", str(seconds).encode())]


def limiters(register_per_minute: float, token_per_minute: float) -> dict[str, list[Bucket]]:
    """The shared buckets of each limited endpoint: registration (and CIMD document fetches, limited
    alike) per address and for all addresses together, token requests per address."""
    return {"register": [bucket("register", register_per_minute, what="client registrations"),
                         bucket("register", register_per_minute * 4, per_address=False, what="client registrations")],
            "cimd": [bucket("cimd", register_per_minute, what="client metadata document fetches"),
                     bucket("cimd", register_per_minute * 4, per_address=False,
                            what="client metadata document fetches")],
            "token": [bucket("token", token_per_minute, what="token requests")]}


class RateLimit:
    """ASGI middleware for one OAuth endpoint (see the module docstring)."""

    def __init__(self, app: Any, *, store: LimitStore, buckets: list[Bucket], backoff: bool = False,
                 refused: Callable[[], None] | None = None) -> None:
        self.app = app
        self.store = store
        # Per address, plus (registration) one bucket for every address together: a caller behind a
        # trusted proxy may still pose as many addresses; this caps the endpoint as a whole.
        self.buckets = buckets
        self.backoff = backoff
        self.refused = refused  # counts a 429 (vp_http_rate_limited_total)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") == "OPTIONS":
            await self.app(scope, receive, send)
            return
        ip = client_ip(scope)
        answer = await refusal(self.store, ip, self.buckets, backoff=self.backoff, refused=self.refused)
        if answer is not None:
            await _reply(send, *answer)
            return
        if not self.backoff:
            await self.app(scope, receive, send)
            return
        store = self.store

        async def watch(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status = message["status"]
                with contextlib.suppress(Exception):  # counting a failure must not lose the answer
                    if status == 401:  # invalid_client: a wrong or missing secret
                        await anyio.to_thread.run_sync(store.failed, ip)
                    elif status < 400:
                        await anyio.to_thread.run_sync(store.succeeded, ip)
            await send(message)

        await self.app(scope, receive, watch)


async def refusal(store: LimitStore, ip: str, buckets: list[Bucket], *, backoff: bool = False,
                  refused: Callable[[], None] | None = None) -> tuple[int, dict[str, Any], list[tuple[bytes, bytes]]] | None:
    """Spend the request's tokens: None when it may go on, else the answer (status, JSON body,
    headers): 429 over a limit, 503 when the store failed (fail closed: these endpoints need the
    database anyway)."""
    try:
        verdict = await anyio.to_thread.run_sync(lambda: store.admit(ip, buckets, backoff=backoff))
    except Exception as exc:  # noqa: BLE001
        log.warning("rate limit store unavailable: %s", exc)
        return 503, {"error": "temporarily_unavailable", "error_description": "BUSY: the rate limit store is "
                                                                              "unavailable; retry shortly"}, [(b"retry-after", b"1")]
    if verdict is None:
        return None
    if refused is not None:
        refused()
    return 429, *too_many(*verdict)


async def _reply(send: Any, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
        (b"cache-control", b"no-store"), *headers]})
    await send({"type": "http.response.body", "body": data})
