"""Sessions, CSRF tokens, security headers and the Host / Origin checks of the dashboard.

- Session: a cookie `vp_dash` holding `{name, via, nonce, exp}` signed with HMAC-SHA256
  (HttpOnly, SameSite=Strict, Secure behind https). On `serve` the key derives from
  BEARER_SECRET_MASTER, so every worker process accepts every other's cookies; the local
  dashboard keeps a random key in the file's `meta` table (open pages survive a restart).
- CSRF: every form carries `csrf` = HMAC(key, "csrf:" + session nonce); a POST without the
  right token, or with an Origin that is not this site, is refused (403) before anything runs.
- Host: on a loopback bind only 127.0.0.1 / localhost / [::1] Host headers are served (a DNS
  rebinding page cannot reach the dashboard); behind `serve` the public host is admitted too.
- Headers: a Content-Security-Policy with no inline script or style, frame-ancestors 'none',
  nosniff, no referrer to other sites (same-origin: with `no-referrer` browsers send `Origin: null`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from starlette.requests import Request

COOKIE = "vp_dash"
SESSION_SECONDS = 12 * 3600
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin",
           "X-Frame-Options": "DENY", "Cache-Control": "no-store"}


@dataclass(frozen=True)
class Session:
    name: str
    via: str
    nonce: str
    exp: int


def local_key(db: Any) -> bytes:
    """The loopback dashboard's signing key, kept in the file's `meta` so that a restart (or a second
    `vantage-peers dashboard` on the same file) keeps sessions and the CSRF tokens of open pages."""
    def get(c: Any) -> str:
        c.execute("INSERT INTO meta (key, value) VALUES ('dashboard.sessionKey', ?) ON CONFLICT DO NOTHING",
                  (secrets.token_hex(32),))
        return c.scalar("SELECT value FROM meta WHERE key = 'dashboard.sessionKey'")

    return bytes.fromhex(db.write(get))


class Signer:
    def __init__(self, master_secret: str | None, *, key: bytes | None = None) -> None:
        if master_secret:
            self.key = hmac.new(master_secret.encode(), b"vantage-peers dashboard session v1", hashlib.sha256).digest()
        else:
            self.key = key or os.urandom(32)

    def _mac(self, data: bytes) -> str:
        return base64.urlsafe_b64encode(hmac.new(self.key, data, hashlib.sha256).digest()).decode().rstrip("=")

    def issue(self, name: str, via: str) -> tuple[str, Session]:
        session = Session(name, via, secrets.token_urlsafe(16), int(time.time()) + SESSION_SECONDS)
        body = base64.urlsafe_b64encode(json.dumps(
            {"n": session.name, "v": session.via, "o": session.nonce, "e": session.exp}).encode()).decode().rstrip("=")
        return f"{body}.{self._mac(body.encode())}", session

    def read(self, cookie: str | None) -> Session | None:
        if not cookie or len(cookie) > 2_000 or "." not in cookie:
            return None
        body, mac = cookie.rsplit(".", 1)
        if not hmac.compare_digest(mac, self._mac(body.encode())):
            return None
        try:
            data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            session = Session(str(data["n"]), str(data["v"]), str(data["o"]), int(data["e"]))
        except (ValueError, KeyError, TypeError):
            return None
        return session if session.exp > time.time() else None

    def csrf(self, session: Session) -> str:
        return self._mac(b"csrf:" + session.nonce.encode())

    def csrf_ok(self, session: Session, token: Any) -> bool:
        return isinstance(token, str) and hmac.compare_digest(token, self.csrf(session))


def host_allowed(request: Request, *, loopback: bool, public_host: str | None) -> bool:
    """On loopback only loopback names; else any host unless PUBLIC_BASE_URL pins it."""
    host = (request.headers.get("host") or "").strip().lower()
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    if loopback:
        return name in LOOPBACK_HOSTS or (public_host is not None and host in (public_host, public_host.split(":")[0]))
    return public_host is None or host in (public_host, public_host.split(":")[0])


def origin_allowed(request: Request) -> bool:
    """A state-changing request must come from this site: its Origin (or Referer) host is the Host."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if not origin:
        return True  # no browser sends a cross-site POST without Origin; the CSRF token still applies
    if origin == "null":
        return False
    return urlparse(origin).netloc.lower() == (request.headers.get("host") or "").lower()
