"""HTTP checks for `vantage-peers doctor`: the master secret, PUBLIC_BASE_URL, bind host, Clerk, TTLs."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def public_base_url_problem(value: str) -> str | None:
    """Why `value` is not a usable issuer (RFC 8414: scheme + host, no query or fragment), or None."""
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return "must look like https://host[:port]"
    if parsed.query or parsed.fragment or parsed.params:
        return "must have no query string or fragment"
    if parsed.path not in ("", "/"):
        return "must be the server's root URL (no path: /mcp and /oauth/* are added to it)"
    if parsed.scheme != "https" and parsed.hostname not in LOOPBACK_NAMES:
        return "must use https:// unless the host is loopback (OAuth 2.1 requires TLS)"
    return None


def doctor_checks(settings: Any) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    secret = settings.bearer_secret_master
    if not secret:
        out.append(("WARN", "http: BEARER_SECRET_MASTER", "unset: `serve` refuses to start (stdio is unaffected)"))
    elif len(secret) < 32:
        out.append(("FAIL", "http: BEARER_SECRET_MASTER", f"only {len(secret)} characters; generate one with "
                    "`openssl rand -hex 32` (64 hex)"))
    elif len(secret) < 64:
        out.append(("WARN", "http: BEARER_SECRET_MASTER", f"{len(secret)} characters; 64 hex "
                    "(`openssl rand -hex 32`) is recommended"))
    else:
        out.append(("ok", "http: BEARER_SECRET_MASTER", f"set ({len(secret)} characters)"))
    if settings.public_base_url:
        problem = public_base_url_problem(settings.public_base_url)
        if problem:
            out.append(("FAIL", "http: PUBLIC_BASE_URL", f"{settings.public_base_url} {problem}"))
        else:
            out.append(("ok", "http: PUBLIC_BASE_URL", settings.public_base_url))
    else:
        out.append(("ok", "http: PUBLIC_BASE_URL", f"unset: issuer = http://{settings.host}:{settings.port} "
                    "(set it to the public https URL behind a proxy)"))
    if settings.host in ("0.0.0.0", "::"):
        out.append(("WARN", "http: HOST", f"{settings.host}: `serve` is reachable from the network; put TLS "
                    "(a reverse proxy) in front and set PUBLIC_BASE_URL"))
    else:
        out.append(("ok", "http: HOST", f"{settings.host}:{settings.port}"))
    if settings.access_token_ttl_seconds <= 0 or settings.refresh_token_ttl_seconds <= 0:
        out.append(("FAIL", "http: token TTLs", "VP_ACCESS_TOKEN_TTL_SECONDS and VP_REFRESH_TOKEN_TTL_SECONDS "
                    "must be positive"))
    else:
        out.append(("ok", "http: token TTLs", f"access {settings.access_token_ttl_seconds}s, refresh "
                    f"{settings.refresh_token_ttl_seconds}s"))
    if settings.clerk_jwt_issuer_domain and not settings.allowed_ext_ids:
        out.append(("WARN", "http: Clerk", "CLERK_JWT_ISSUER_DOMAIN is set but VP_ALLOWED_EXT_IDS is empty: "
                    "every /issueBearerFromClerk call is refused (403)"))
    elif settings.clerk_jwt_issuer_domain:
        out.append(("ok", "http: Clerk", f"{settings.clerk_jwt_issuer_domain}, {len(settings.allowed_ext_ids)} "
                    "extension id(s) allowed"))
    return out
