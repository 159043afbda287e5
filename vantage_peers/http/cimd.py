"""OAuth Client ID Metadata Documents (CIMD, draft-ietf-oauth-client-id-metadata-document; the
registration the MCP 2025-11-25 / 2026-07-28 authorization spec prefers).

A `client_id` that is an `https://` URL names its own metadata document: the server fetches it and
treats the client as a public client (`token_endpoint_auth_method: none`, PKCE) whose
`redirect_uris` are the document's. The fetch is hardened against SSRF and abuse:
- https only, no userinfo, no fragment, a path; at most 2,000 characters;
- every address the host resolves to must be public (no loopback, link-local, private, CGNAT,
  multicast or reserved) and the connection goes to the address that was checked (no DNS rebinding);
  `VP_CIMD_TEST_LOOPBACK=1` (tests only) allows http:// and loopback addresses, nothing else;
- a 5 s budget, at most 5 KB, no redirects (a 3xx is a refusal);
- the document must be a JSON object whose `client_id` is exactly the URL, with `redirect_uris`,
  and no secret (a public client);
- cached per its `Cache-Control` (`max-age`, `no-store`), 5 min by default, at most 24 h.
A resolved client gets a row in `oauth_clients` (`registeredVia = 'cimd'`, profile `client-generic`
on first sight, kept as an operator set it afterwards), so consent, tokens, `token set-profile` and
revocation work as for any other client.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import re
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..core.errors import VantageError

MAX_BYTES = 5 * 1024
TIMEOUT_S = 5.0
MAX_URL_CHARS = 2000
DEFAULT_TTL_S = 300
MAX_TTL_S = 86_400
MAX_REDIRECT_URIS = 20
MAX_NAME_CHARS = 200


class CimdRefused(VantageError):
    """The client_id URL or its document is not acceptable; the message says why."""

    code = "CIMD_REFUSED"


class CimdUnreachable(CimdRefused):
    """The document's host could not be reached at all (its name does not resolve, or no connection
    could be made): on a server without outbound access, every CIMD client fails this way (#31)."""


def is_cimd_client_id(client_id: str | None) -> bool:
    return bool(client_id) and client_id.startswith(("https://", "http://"))  # type: ignore[union-attr]


@dataclass(frozen=True)
class ClientDocument:
    client_id: str
    client_name: str | None
    redirect_uris: tuple[str, ...]
    grant_types: tuple[str, ...]
    raw: dict[str, Any]


def check_url(url: str, *, test_loopback: bool) -> tuple[str, str, int, str]:
    """(scheme, host, port, path-with-query) of an acceptable client_id URL, else CimdRefused."""
    if len(url) > MAX_URL_CHARS:
        raise CimdRefused(f"client_id URL longer than {MAX_URL_CHARS} characters")
    parts = urlsplit(url)
    allowed = ("https", "http") if test_loopback else ("https",)
    if parts.scheme not in allowed:
        raise CimdRefused("a client_id URL must use https")
    if parts.username or parts.password or "@" in parts.netloc:
        raise CimdRefused("a client_id URL must not carry user information")
    if parts.fragment or url.endswith("#"):
        raise CimdRefused("a client_id URL must not have a fragment")
    if not parts.hostname:
        raise CimdRefused("a client_id URL needs a host")
    if parts.path in ("", "/") or any(seg in (".", "..") for seg in parts.path.split("/")):
        raise CimdRefused("a client_id URL needs a path without . or .. segments")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise CimdRefused("a client_id URL has an invalid port") from None
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, parts.hostname, port, target


def _address_ok(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, *, test_loopback: bool) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if test_loopback and ip.is_loopback:
        return True
    return ip.is_global and not (ip.is_multicast or ip.is_reserved or ip.is_unspecified)


def resolve_public(host: str, port: int, *, test_loopback: bool) -> str:
    """One checked address to connect to; CimdRefused when any resolved address is not public."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise CimdUnreachable(f"the client_id host {host!r} does not resolve ({exc})") from None
    except UnicodeError as exc:
        raise CimdRefused(f"the client_id host {host!r} does not resolve ({exc})") from None
    addresses = []
    for info in infos:
        ip = ipaddress.ip_address(info[4][0].split("%")[0])
        if not _address_ok(ip, test_loopback=test_loopback):
            raise CimdRefused(f"the client_id host {host!r} resolves to {ip}, a non-public address "
                              "(loopback, link-local, private or reserved): refused")
        addresses.append(str(ip))
    if not addresses:
        raise CimdRefused(f"the client_id host {host!r} has no address")
    return addresses[0]


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to the checked address, with SNI and certificate checks for the URL's host name."""

    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


_MAX_AGE = re.compile(r"max-age\s*=\s*(\d+)", re.I)


def cache_seconds(cache_control: str | None) -> int:
    value = (cache_control or "").lower()
    if "no-store" in value or "no-cache" in value:
        return 0
    found = _MAX_AGE.search(value)
    return min(int(found.group(1)), MAX_TTL_S) if found else DEFAULT_TTL_S


def fetch(url: str, *, test_loopback: bool) -> tuple[dict[str, Any], int]:
    """The document as JSON and how long it may be cached (seconds)."""
    scheme, host, port, target = check_url(url, test_loopback=test_loopback)
    deadline = time.monotonic() + TIMEOUT_S
    address = resolve_public(host, port, test_loopback=test_loopback)
    if test_loopback and scheme == "http" and not ipaddress.ip_address(address).is_loopback:
        raise CimdRefused("http:// client_id URLs are allowed for loopback tests only")
    kind = _PinnedHTTPS if scheme == "https" else _PinnedHTTP
    conn = kind(host, address, port, max(0.1, deadline - time.monotonic()))
    try:
        try:
            conn.connect()
        except ssl.SSLError:
            raise  # the host answered: its certificate is the document's problem, not our network's
        except OSError as exc:  # no route, refused, timed out: nothing reached the host
            raise CimdUnreachable(f"the metadata document's host could not be reached ({type(exc).__name__}: "
                                  f"{exc})") from None
        conn.request("GET", target, headers={"Accept": "application/json", "User-Agent": "vantage-peers-cimd"})
        response = conn.getresponse()
        if 300 <= response.status < 400:
            raise CimdRefused(f"the metadata document answered {response.status} (a redirect): redirects "
                              "are not followed")
        if response.status != 200:
            raise CimdRefused(f"the metadata document answered HTTP {response.status}")
        length = response.getheader("Content-Length")
        if length and length.isdigit() and int(length) > MAX_BYTES:
            raise CimdRefused(f"the metadata document is {length} bytes; at most {MAX_BYTES} are accepted")
        body = b""
        while len(body) <= MAX_BYTES:
            if time.monotonic() > deadline:
                raise CimdRefused(f"the metadata document took longer than {TIMEOUT_S:g} s")
            chunk = response.read(1024)
            if not chunk:
                break
            body += chunk
        if len(body) > MAX_BYTES:
            raise CimdRefused(f"the metadata document is larger than {MAX_BYTES} bytes")
        ttl = cache_seconds(response.getheader("Cache-Control"))
    except (OSError, http.client.HTTPException) as exc:
        raise CimdRefused(f"the metadata document could not be fetched ({type(exc).__name__}: {exc})") from None
    finally:
        conn.close()
    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise CimdRefused("the metadata document is not JSON") from None
    return doc, ttl


def parse_document(url: str, doc: Any) -> ClientDocument:
    if not isinstance(doc, dict):
        raise CimdRefused("the metadata document must be a JSON object")
    if doc.get("client_id") != url:
        raise CimdRefused("the metadata document's client_id must equal the URL it was fetched from")
    if "client_secret" in doc or "client_secret_expires_at" in doc:
        raise CimdRefused("a metadata document must not carry a client_secret")
    method = doc.get("token_endpoint_auth_method", "none")
    if method != "none":
        raise CimdRefused(f"token_endpoint_auth_method {method!r} is not supported for metadata-document "
                          "clients: use none (public client with PKCE)")
    uris = doc.get("redirect_uris")
    if not isinstance(uris, list) or not uris or len(uris) > MAX_REDIRECT_URIS:
        raise CimdRefused(f"the metadata document needs redirect_uris: 1 to {MAX_REDIRECT_URIS} URIs")
    for uri in uris:
        parts = urlsplit(uri) if isinstance(uri, str) else None
        if parts is None or not parts.scheme or parts.fragment or len(uri) > MAX_URL_CHARS:
            raise CimdRefused(f"redirect_uris holds an invalid URI: {str(uri)[:100]!r}")
    name = doc.get("client_name")
    if name is not None and (not isinstance(name, str) or len(name) > MAX_NAME_CHARS):
        raise CimdRefused(f"client_name must be a string of at most {MAX_NAME_CHARS} characters")
    grants = doc.get("grant_types", ["authorization_code", "refresh_token"])
    if not isinstance(grants, list) or not set(grants) <= {"authorization_code", "refresh_token"}:
        raise CimdRefused("grant_types may hold authorization_code and refresh_token only")
    return ClientDocument(url, name, tuple(uris), tuple(grants), doc)


class DocumentCache:
    """Resolved documents by URL until their cache lifetime ends (refusals are not cached)."""

    def __init__(self) -> None:
        self._items: dict[str, tuple[float, ClientDocument]] = {}
        self._lock = threading.Lock()

    def cached(self, url: str) -> bool:
        """A fresh document for `url` is here: resolving it fetches nothing."""
        with self._lock:
            hit = self._items.get(url)
            return hit is not None and hit[0] > time.monotonic()

    def resolve(self, url: str, *, test_loopback: bool) -> ClientDocument:
        now = time.monotonic()
        with self._lock:
            hit = self._items.get(url)
            if hit is not None and hit[0] > now:
                return hit[1]
        raw, ttl = fetch(url, test_loopback=test_loopback)
        doc = parse_document(url, raw)
        with self._lock:
            if ttl > 0:
                if len(self._items) > 1000:  # bounded: drop expired entries, then the oldest
                    self._items = {k: v for k, v in self._items.items() if v[0] > now} or {}
                self._items[url] = (now + ttl, doc)
            else:
                self._items.pop(url, None)
        return doc
