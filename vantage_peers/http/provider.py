"""The SDK's `OAuthAuthorizationServerProvider` and `TokenVerifier`, backed by the SQLite file.

Only hashes reach the tables. Authorization codes and refresh tokens are single-use (decided by a
conditional UPDATE); presenting a rotated refresh token again revokes its whole grant (RFC 9700
§4.14.2). Access tokens live `VP_ACCESS_TOKEN_TTL_SECONDS`; the master bearer is compared in
constant time against the environment, without touching the database.
"""

from __future__ import annotations

import contextvars
import json
import logging
import time
from typing import Any
from urllib.parse import urlencode

import anyio.to_thread
from mcp.server.auth.provider import (
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    RegistrationError,
    TokenError,
    construct_redirect_uri,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from ..core.errors import VantageError
from ..core.ids import new_id, now_ms
from ..core.principal import Principal
from ..db import Database
from . import profiles, store
from .cimd import CimdRefused, CimdUnreachable, DocumentCache, is_cimd_client_id
from .cimd_mode import CimdPolicy
from .cimd_store import upsert_cimd_client
from .tokens import digest, new_secret, same

log = logging.getLogger(__name__)
# The CIMD client_id this request already resolved (a no-store document is fetched once per request).
_RESOLVED: contextvars.ContextVar[str | None] = contextvars.ContextVar("vp_cimd_resolved", default=None)
CODE_TTL_MS = 5 * 60_000
CONSENT_TTL_MS = 10 * 60_000


class Code(AuthorizationCode):
    family: str


class Refresh(RefreshToken):
    family: str


class SqliteOAuthProvider:
    """OAuthAuthorizationServerProvider[Code, Refresh, Principal] on the OAuth tables of migration 007."""

    def __init__(self, db: Database, *, base_url: str, access_ttl_s: int, refresh_ttl_s: int,
                 cimd_test_loopback: bool = False, cimd_policy: CimdPolicy | None = None) -> None:
        self.db = db
        # CIMD (issue 24): a client_id that is a URL is resolved from its metadata document (cimd.py);
        # whether that is offered at all: VP_CIMD (cimd_mode.py, #31).
        self.cimd = DocumentCache()
        self.policy = cimd_policy or CimdPolicy("on")
        self.cimd_test_loopback = cimd_test_loopback
        self.base_url = base_url.rstrip("/")
        self.access_ttl_ms = access_ttl_s * 1000
        self.refresh_ttl_ms = refresh_ttl_s * 1000

    async def _write(self, fn: Any) -> Any:
        return await anyio.to_thread.run_sync(self.db.write, fn)

    async def _read(self, fn: Any) -> Any:
        return await anyio.to_thread.run_sync(self.db.read, fn)

    # -- clients ------------------------------------------------------------------------------
    async def resolve_cimd(self, client_id: str) -> None:
        """Fetch (or take from cache) a URL client_id's document and record the client; CimdRefused."""
        if not self.policy.fetches:
            raise CimdRefused("this server does not accept client metadata documents (VP_CIMD=off): register "
                              "with Dynamic Client Registration (/oauth/register)")
        try:
            doc = await anyio.to_thread.run_sync(
                lambda: self.cimd.resolve(client_id, test_loopback=self.cimd_test_loopback))
        except CimdUnreachable:
            self.policy.unreachable()  # VP_CIMD=auto: stop offering what this server cannot fetch
            raise
        self.policy.reached()
        await self._write(lambda c: upsert_cimd_client(c, doc, now=now_ms()))
        _RESOLVED.set(client_id)

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        # /oauth/authorize resolved it a moment ago in this request (cimd_http.py): no second fetch
        if is_cimd_client_id(client_id) and _RESOLVED.get() != client_id:
            try:
                await self.resolve_cimd(client_id)
            except CimdRefused as exc:
                log.info("CIMD client refused: %s", exc)
                return None
        row = await self._read(lambda c: store.get_client(c, client_id))
        if row is None:
            return None
        meta = json.loads(row["metadata"] or "{}")
        # client_secret carries the stored SHA-256: HashedClientAuthenticator compares hashes.
        return OAuthClientInformationFull.model_validate({
            **meta, "client_id": row["clientId"], "client_secret": row["clientSecretHash"],
            "client_name": row["name"], "redirect_uris": json.loads(row["redirectUris"]) or None,
            "grant_types": json.loads(row["grantTypes"]), "token_endpoint_auth_method": row["authMethod"],
            "scope": row["scope"], "client_id_issued_at": row["createdAt"] // 1000})

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        await self.register_public_client(client_info)

    async def register_public_client(self, client_info: OAuthClientInformationFull,
                                     requested_profile: str | None = None) -> str:
        """DCR: always `client-generic`; `master` (or any other profile) is a ScopeViolation here too."""
        if requested_profile not in (None, profiles.CLIENT_GENERIC):
            raise RegistrationError("invalid_client_metadata",
                                    f"ScopeViolation: self-registration yields scope profile client-generic only; "
                                    f"{requested_profile!r} is assigned by an operator")
        await self._write(lambda c: self._insert(c, client_info, profiles.CLIENT_GENERIC, "dcr"))
        return profiles.CLIENT_GENERIC

    def _insert(self, conn: Any, info: OAuthClientInformationFull, profile: str, via: str) -> None:
        meta = info.model_dump(mode="json", exclude_none=True, exclude={
            "client_id", "client_secret", "client_name", "redirect_uris", "grant_types",
            "token_endpoint_auth_method", "scope", "client_id_issued_at", "client_secret_expires_at"})
        store.insert_client(
            conn, client_id=info.client_id, secret_hash=digest(info.client_secret) if info.client_secret else None,
            name=info.client_name, redirect_uris=[str(u) for u in info.redirect_uris or []],
            grant_types=list(info.grant_types), auth_method=info.token_endpoint_auth_method or "client_secret_post",
            scope=info.scope, profile=profile, metadata=meta, via=via, now=now_ms())

    def create_client_sync(self, conn: Any, info: OAuthClientInformationFull, profile: str, via: str) -> None:
        """Operator path (admin API, CLI): any existing profile except master."""
        if profile == profiles.MASTER:
            # (RegistrationError is a frozen dataclass: it cannot travel through db.write's rollback.)
            raise VantageError("ScopeViolation: master belongs to BEARER_SECRET_MASTER only",
                               code="SCOPE_VIOLATION")
        profiles.require(conn, profile)
        self._insert(conn, info, profile, via)

    # -- authorization ------------------------------------------------------------------------
    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        """Park the request and send the browser to the consent page (consent.py decides)."""
        request_id = new_secret()
        doc = params.model_dump(mode="json")
        await self._write(lambda c: store.insert_request(
            c, request_hash=digest(request_id), csrf_hash="", client_id=client.client_id, params=doc,
            expires_at=now_ms() + CONSENT_TTL_MS))
        return f"{self.base_url}/oauth/consent?{urlencode({'request': request_id})}"

    def approve_sync(self, conn: Any, request_row: dict[str, Any]) -> str:
        """The consent page approved: mint a code and return the client's redirect URL."""
        params = json.loads(request_row["params"])
        code = new_secret()
        store.insert_code(conn, code_hash=digest(code), client_id=request_row["clientId"],
                          params={**params, "family": new_id("grant")}, expires_at=now_ms() + CODE_TTL_MS)
        return construct_redirect_uri(params["redirect_uri"], code=code, state=params.get("state"))

    async def load_authorization_code(self, client: OAuthClientInformationFull, authorization_code: str) -> Code | None:
        h = digest(authorization_code)

        def load(conn: Any) -> dict[str, Any] | None:
            row = conn.one("SELECT * FROM oauth_authorization_codes WHERE codeHash = ?", (h,))
            if row is not None and row["usedAt"] is not None:
                # A replayed code: revoke what it granted (RFC 6749 §4.1.2, OAuth 2.1 §4.1.3).
                store.revoke_family(conn, json.loads(row["params"])["family"], now=now_ms())
                return None
            return row

        row = await self._write(load)
        if row is None or row["clientId"] != client.client_id:
            return None
        p = json.loads(row["params"])
        return Code(code=authorization_code, scopes=p.get("scopes") or [], expires_at=row["expiresAt"] / 1000,
                    client_id=row["clientId"], code_challenge=p["code_challenge"], redirect_uri=p["redirect_uri"],
                    redirect_uri_provided_explicitly=p["redirect_uri_provided_explicitly"],
                    resource=p.get("resource"), family=p["family"])

    async def exchange_authorization_code(self, client: OAuthClientInformationFull, authorization_code: Code) -> OAuthToken:
        def run(conn: Any) -> OAuthToken | None:
            if not store.consume_code(conn, digest(authorization_code.code), now=now_ms()):
                return None
            return self._issue(conn, client.client_id, authorization_code.scopes, authorization_code.resource,
                               authorization_code.family, refresh=True)

        # TokenError is a frozen dataclass: raised inside db.write's rollback it would become a
        # FrozenInstanceError (a 500), so the loser of a race on one code is told here, outside.
        token = await self._write(run)
        if token is None:
            raise TokenError("invalid_grant", "authorization code was already used or has expired")
        return token

    async def exchange_client_credentials(self, client: OAuthClientInformationFull, scopes: list[str],
                                          resource: str | None) -> OAuthToken:
        """client_credentials (RFC 6749 §4.4): an access token only, no refresh token (§4.4.3)."""
        return await self._write(lambda c: self._issue(c, client.client_id, scopes, resource, new_id("grant"),
                                                       refresh=False))

    def _issue(self, conn: Any, client_id: str, scopes: list[str], resource: str | None, family: str, *,
               refresh: bool) -> OAuthToken:
        now = now_ms()
        access = new_secret()
        store.insert_access(conn, token_hash=digest(access), client_id=client_id, scopes=scopes, resource=resource,
                            family=family, expires_at=now + self.access_ttl_ms, now=now)
        refresh_token = None
        if refresh:
            refresh_token = new_secret()
            store.insert_refresh(conn, token_hash=digest(refresh_token), client_id=client_id, scopes=scopes,
                                 resource=resource, family=family, expires_at=now + self.refresh_ttl_ms, now=now)
        return OAuthToken(access_token=access, expires_in=self.access_ttl_ms // 1000,
                          scope=" ".join(scopes) or None, refresh_token=refresh_token)

    # -- refresh ------------------------------------------------------------------------------
    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> Refresh | None:
        h = digest(refresh_token)

        def load(conn: Any) -> dict[str, Any] | None:
            row = store.get_refresh(conn, h)
            if row is None or row["revokedAt"] is not None:
                return None
            if row["rotatedAt"] is not None:
                store.revoke_family(conn, row["familyId"], now=now_ms())  # replay of a rotated token
                return None
            return row

        row = await self._write(load)
        if row is None or row["clientId"] != client.client_id:
            return None
        return Refresh(token=refresh_token, client_id=row["clientId"], scopes=json.loads(row["scopes"]),
                       expires_at=row["expiresAt"] // 1000, resource=row["resource"], family=row["familyId"])

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: Refresh,
                                     scopes: list[str]) -> OAuthToken:
        def run(conn: Any) -> OAuthToken | None:
            if not store.rotate_refresh(conn, digest(refresh_token.token), now=now_ms()):
                return None
            return self._issue(conn, client.client_id, scopes, refresh_token.resource, refresh_token.family,
                               refresh=True)

        token = await self._write(run)  # (TokenError raised outside db.write, as above)
        if token is None:
            raise TokenError("invalid_grant", "refresh token was already used, revoked or expired")
        return token

    # -- access tokens ------------------------------------------------------------------------
    async def load_access_token(self, token: str) -> Principal | None:
        return await self._read(lambda c: oauth_principal(c, token))

    async def revoke_token(self, token: Principal | Refresh) -> None:
        family = getattr(token, "family", None)
        if family:
            await self._write(lambda c: store.revoke_family(c, family, now=now_ms()))


def oauth_principal(conn: Any, token: str) -> Principal | None:
    row = store.get_access(conn, digest(token), now=now_ms())
    if row is None:
        return None
    profile = profiles.get(conn, row["scopeProfile"]) or profiles.get(conn, profiles.CLIENT_GENERIC)
    if profile is None or profile.master:  # a row can never carry master: env var only
        profile = profiles.get(conn, profiles.CLIENT_GENERIC)
    return Principal(token=token, client_id=row["clientId"], scopes=json.loads(row["scopes"]),
                     expires_at=row["expiresAt"] // 1000, resource=row["resource"], kind="oauth",
                     profile=profile, family=row["familyId"])


def clerk_principal(conn: Any, token: str) -> Principal | None:
    row = store.get_user_bearer(conn, digest(token), now=now_ms())
    if row is None:
        return None
    template = profiles.get(conn, profiles.CLERK_USER)
    profile = template.substitute(workspaceId=row["workspaceId"])  # type: ignore[union-attr]
    return Principal(token=token, client_id=f"clerk:{row['clerkUserId']}", scopes=["mcp:full"],
                     expires_at=row["expiresAt"] // 1000, kind="clerk", profile=profile,
                     subject=row["clerkUserId"])


class VantageTokenVerifier:
    """TokenVerifier: master bearer (constant time, no DB), then OAuth access tokens, then Clerk bearers."""

    def __init__(self, db: Database, master_secret: str | None) -> None:
        self.db = db
        self.master = master_secret

    async def verify_token(self, token: str) -> Principal | None:
        if self.master and same(token, self.master):
            return Principal(token=token, client_id="master", scopes=["mcp:full"], kind="master",
                             profile=profiles.MASTER_PROFILE)
        if len(token) > 512:
            return None

        def lookup(conn: Any) -> Principal | None:
            return oauth_principal(conn, token) or clerk_principal(conn, token)

        found = await anyio.to_thread.run_sync(self.db.read, lookup)
        if found is not None and found.expires_at is not None and found.expires_at < time.time():
            return None
        return found
