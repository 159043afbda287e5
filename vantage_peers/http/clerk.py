"""`POST /issueBearerFromClerk` (§30.6): a Clerk session JWT becomes a 7-day vantage-peers bearer.

The JWT is verified with PyJWT against the JWKS at `<CLERK_JWT_ISSUER_DOMAIN>/.well-known/jwks.json`
(RS256 only; signature, `iss` and `exp` checked). The extension id must be in `VP_ALLOWED_EXT_IDS`
(unset = none allowed); each Clerk user gets 5 issuances in any 60 s (counted from the audit log
inside the issuing transaction, so every serve process shares the limit). The bearer's hash, its owner and an audit row are written in
one transaction. The bearer acts under the `clerk-user` scope profile with `{workspaceId}` = the
Clerk user id (default: read/write `workspace/<id>`, read `global`, act as `<id>`).
"""

from __future__ import annotations

import json
from typing import Any

import anyio.to_thread
import jwt
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..core.ids import now_ms
from ..db import Database
from . import store
from .tokens import digest, new_secret

TTL_7_DAYS = 7 * 24 * 60 * 60 * 1000
RATE_PER_MINUTE = 5


def issuer_url(domain: str) -> str:
    domain = domain.strip().rstrip("/")
    return domain if domain.startswith(("https://", "http://")) else f"https://{domain}"


def _user_name(claims: dict[str, Any]) -> str:
    for key in ("name", "full_name", "username"):
        if isinstance(claims.get(key), str) and claims[key].strip():
            return claims[key].strip()[:100]
    for key in ("email", "email_address", "primary_email"):
        if isinstance(claims.get(key), str) and "@" in claims[key]:
            return claims[key].split("@", 1)[0][:100]
    return f"user-{str(claims.get('sub', ''))[-8:]}"


class ClerkExchange:
    def __init__(self, db: Database, *, issuer_domain: str | None, allowed_ext_ids: tuple[str, ...]) -> None:
        self.db = db
        self.issuer = issuer_url(issuer_domain) if issuer_domain else None
        self.allowed = allowed_ext_ids
        self._jwks = jwt.PyJWKClient(f"{self.issuer}/.well-known/jwks.json", cache_keys=True,
                                     lifespan=300, timeout=10) if self.issuer else None

    def _verify(self, token: str) -> dict[str, Any]:
        assert self._jwks is not None
        key = self._jwks.get_signing_key_from_jwt(token)
        return jwt.decode(token, key.key, algorithms=["RS256"], issuer=self.issuer,
                          options={"require": ["exp", "iss", "sub"], "verify_aud": False})

    async def handle(self, request: Request) -> Response:
        def fail(status: int, message: str, **headers: str) -> Response:
            return JSONResponse({"error": message}, status_code=status, headers=headers or None)

        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        clerk_jwt, ext_id, ext_version = body.get("clerkJwt"), body.get("extId"), body.get("extVersion")
        if not isinstance(clerk_jwt, str) or not clerk_jwt:
            return fail(400, "Missing required field: clerkJwt")
        if not isinstance(ext_id, str) or not ext_id:
            return fail(400, "Missing required field: extId")
        if self._jwks is None:
            return fail(500, "Server misconfigured: CLERK_JWT_ISSUER_DOMAIN not set")
        try:
            claims = await anyio.to_thread.run_sync(self._verify, clerk_jwt)
        except (jwt.PyJWTError, ValueError, TypeError):
            return fail(401, "Invalid Clerk JWT")
        if ext_id not in self.allowed:
            return fail(403, "Extension not authorized")
        user_id = str(claims["sub"])
        bearer = new_secret()
        version = ext_version if isinstance(ext_version, str) else None
        forwarded = request.headers.get("x-forwarded-for", "")
        ip = forwarded.split(",")[0].strip() or (request.client.host if request.client else None)
        agent = request.headers.get("user-agent")
        name = _user_name(claims)

        def issue(conn: Any) -> int | None:
            now = now_ms()
            # BEGIN IMMEDIATE serializes issuers across processes: the count and the insert agree.
            if store.issued_recently(conn, user_id, now=now) >= RATE_PER_MINUTE:
                return None
            expires = now + TTL_7_DAYS
            conn.execute("INSERT INTO userBearerTokens (tokenHash, clerkUserId, workspaceId, userName, extId, "
                         "expiresAt, createdAt) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (digest(bearer), user_id, user_id, name, ext_id, expires, now))
            conn.execute("INSERT INTO credentialsAuditLog (clerkUserId, workspaceId, extId, extVersion, issuedAt, "
                         "ip, userAgent) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (user_id, user_id, ext_id, version, now, ip, agent))
            return expires

        expires_at = await anyio.to_thread.run_sync(self.db.write, issue)
        if expires_at is None:
            return fail(429, "Rate limit exceeded. Try again in 1 minute.", **{"Retry-After": "60"})
        return JSONResponse({"workspaceId": user_id, "bearer": bearer, "expiresAt": expires_at,
                             "userName": name, "workspaceName": name}, headers={"Cache-Control": "no-store"})
