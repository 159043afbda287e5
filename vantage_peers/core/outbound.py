"""Outbound HTTP for every client the server runs (GitHub, deployment logs, future ones).

Foundation layer: imports nothing from the project. What it guarantees:

- **credentials never follow a redirect off-origin.** urllib's default opener follows a 302 and
  re-sends `Authorization` to whatever host the `Location` names. Here redirects are followed by
  hand: a same-origin redirect (scheme, host, port) keeps the headers; a redirect to another origin
  is refused when the request carries credentials (`Authorization`, `Cookie`, `Proxy-Authorization`
  or any header named in `secret_headers`), and followed without them otherwise;
- a timeout on every request, a cap on redirects, and a cap on the response size (read at most
  `max_bytes`, then the answer is an error, never a partly-read body taken for a whole one).
"""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

DEFAULT_TIMEOUT = 20.0
DEFAULT_MAX_BYTES = 8 * 1024 * 1024
MAX_REDIRECTS = 3
CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})
REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})


@dataclass
class Reply:
    status: int | None               # None: no usable answer (network error, timeout, refused redirect, too big)
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)  # lower-cased names
    error: str | None = None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Hand every 3xx back to `request` (as an HTTPError) instead of following it."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001 - urllib's signature
        return None


_OPENER = urllib.request.build_opener(_NoRedirect())


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in; user info is not part of it."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port


def _has_credentials(headers: dict[str, str], secret: frozenset[str]) -> bool:
    return any(name.lower() in CREDENTIAL_HEADERS or name.lower() in secret for name in headers)


def _read_capped(resp: Any, max_bytes: int) -> bytes | None:
    data = resp.read(max_bytes + 1)
    return None if len(data) > max_bytes else data


def request(method: str, url: str, *, headers: dict[str, str] | None = None, data: bytes | None = None,
            timeout: float = DEFAULT_TIMEOUT, max_bytes: int = DEFAULT_MAX_BYTES,
            secret_headers: tuple[str, ...] = (), max_redirects: int = MAX_REDIRECTS) -> Reply:
    """One HTTP exchange; never raises for network trouble (the Reply says what happened)."""
    headers = dict(headers or {})
    secret = frozenset(h.lower() for h in secret_headers)
    started = time.monotonic()
    for _ in range(max_redirects + 1):
        if urllib.parse.urlsplit(url).scheme.lower() not in ("http", "https"):
            return Reply(status=None, error=f"refused: {url[:200]!r} is not an http(s) URL")
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        remaining = max(0.1, timeout - (time.monotonic() - started))
        try:
            with _OPENER.open(req, timeout=remaining) as resp:
                body = _read_capped(resp, max_bytes)
                status, resp_headers = resp.status, resp.headers
        except urllib.error.HTTPError as exc:
            status, resp_headers = exc.code, exc.headers
            try:
                body = _read_capped(exc, max_bytes)
            except (OSError, ValueError):
                body = b""
        except (urllib.error.URLError, TimeoutError, OSError, ValueError) as exc:
            late = time.monotonic() - started >= timeout * 0.9
            return Reply(status=None, error=f"{'timeout' if late else type(exc).__name__}: {exc}")
        names = {k.lower(): v for k, v in (resp_headers.items() if resp_headers is not None else [])}
        if body is None:
            return Reply(status=None, headers=names,
                         error=f"response too large: more than {max_bytes} bytes from {origin(url)[1]}")
        if status not in REDIRECT_CODES or "location" not in names:
            return Reply(status=status, body=body, headers=names)
        target = urllib.parse.urljoin(url, names["location"])
        if origin(target) != origin(url) and _has_credentials(headers, secret):
            scheme, host, port = origin(target)
            return Reply(status=None, headers=names,
                         error=f"redirect refused: {status} to another origin ({scheme}://{host}:{port}) "
                               "would carry this request's credentials")
        if status == 303 or (status in (301, 302) and method == "POST"):
            method, data = "GET", None  # what browsers do: the body is not re-sent
            headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
        url = target
    return Reply(status=None, error=f"too many redirects (more than {max_redirects})")
