"""The client address of a request: the TCP peer, unless the peer is a proxy the operator trusts
(`VP_TRUSTED_PROXIES`: comma-separated IPs or CIDRs; default none — loopback is not trusted either).

From a trusted peer, `X-Forwarded-For` (or, when that is absent, `Forwarded: for=…`, RFC 7239) is
read from the right: each hop that is itself a trusted proxy is skipped, and the first that is not is
the client. Anything to its left was written by the client and is ignored. From an untrusted peer
both headers are ignored, so a caller cannot pick the address its rate limits are counted under.
`X-Forwarded-Proto` (or `Forwarded: proto=`) from a trusted peer sets the request's scheme (the
dashboard marks its cookies `Secure` on https).
uvicorn's own header handling is off (`serve.py`: `proxy_headers=False`): it trusts 127.0.0.1 by
default, through which a local caller could pose as any address.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_FOR = re.compile(r'(?:^|;)\s*for\s*=\s*("?)([^;,"]*)\1', re.I)


def parse_trusted(value: str | None) -> tuple[Network, ...]:
    """`VP_TRUSTED_PROXIES` as networks; ValueError naming the entry that is neither an IP nor a CIDR."""
    out = []
    for entry in (value or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        try:
            out.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(f"VP_TRUSTED_PROXIES: {entry!r} is not an IP address or CIDR") from None
    return tuple(out)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = text.strip()
    if text.startswith("["):  # [v6]:port
        text = text[1:text.find("]")] if "]" in text else text[1:]
    elif text.count(":") == 1:  # v4:port
        text = text.split(":", 1)[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _hops(headers: dict[bytes, bytes]) -> list[str]:
    xff = headers.get(b"x-forwarded-for")
    if xff is not None:
        return [h.strip() for h in xff.decode("latin-1").split(",")]
    forwarded = headers.get(b"forwarded")
    if forwarded is None:
        return []
    hops = []
    for element in forwarded.decode("latin-1").split(","):
        found = _FOR.search(element)
        hops.append(found.group(2) if found else "")
    return hops


def client_address(peer: str, headers: dict[bytes, bytes], trusted: Iterable[Network]) -> str:
    """The address a request is counted under (see the module docstring)."""
    nets = tuple(trusted)
    if not nets or not _trusted(peer, nets):
        return peer
    for hop in reversed(_hops(headers)):
        if not _trusted(hop, nets):
            ip = _address(hop)
            return str(ip) if ip is not None else peer  # garbage from the client: count it as the proxy
    return peer


class ClientAddress:
    """ASGI middleware: `scope["client"]` becomes the client address for everything after it."""

    def __init__(self, app: ASGIApp, trusted: tuple[Network, ...] = ()) -> None:
        self.app = app
        self.trusted = trusted

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.trusted and scope["type"] in ("http", "websocket") and scope.get("client"):
            peer = str(scope["client"][0])
            headers = dict(scope.get("headers") or [])
            found = client_address(peer, headers, self.trusted)
            if found != peer:
                scope = {**scope, "client": (found, 0)}
            proto = forwarded_proto(headers) if _trusted(peer, self.trusted) else None
            if proto and scope["type"] == "http":  # TLS ended at the proxy: cookies stay Secure (dashboard)
                scope = {**scope, "scheme": proto}
        await self.app(scope, receive, send)


_PROTO = re.compile(r'(?:^|;)\s*proto\s*=\s*"?(https?)"?', re.I)


def forwarded_proto(headers: dict[bytes, bytes]) -> str | None:
    """The scheme the nearest proxy saw (`X-Forwarded-Proto`, else `Forwarded: proto=`), or None."""
    xfp = headers.get(b"x-forwarded-proto")
    if xfp is not None:
        value = xfp.decode("latin-1").split(",")[-1].strip().lower()
        return value if value in ("http", "https") else None
    forwarded = headers.get(b"forwarded")
    if forwarded is not None:
        found = _PROTO.search(forwarded.decode("latin-1").split(",")[-1])
        return found.group(1).lower() if found else None
    return None


def _trusted(peer: str, nets: tuple[Network, ...]) -> bool:
    ip = _address(peer)
    return ip is not None and any(ip in net for net in nets)


def trusted_from_env(environ: Any) -> tuple[Network, ...]:
    return parse_trusted(environ.get("VP_TRUSTED_PROXIES"))
