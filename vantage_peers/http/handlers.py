"""Where the SDK's OAuth endpoints are extended, each for one reason the spec gives.

- `HashedClientAuthenticator`: the SDK compares the presented client secret with a stored
  plaintext secret; we store only SHA-256 (§30.3), so the presented secret is hashed first.
- `VantageTokenHandler`: the SDK's token handler knows `authorization_code` and `refresh_token`;
  `client_credentials` (RFC 6749 §4.4, §30.2) is handled here and every other grant is passed to
  the SDK's handler unchanged.
- `VantageRegistrationHandler`: DCR with the spec's differences — `vp_client_…` ids, the
  `client-generic` profile (a `master` request is a `ScopeViolation`), `client_credentials`-only
  clients, and `scope_profile` / `token_endpoint` in the response.
- `SpecRequireAuth`: the 401 header and body of §30.3/§30.4.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from typing import Any
from urllib.parse import unquote

from mcp.server.auth.handlers.register import RegistrationErrorResponse
from mcp.server.auth.handlers.token import TokenErrorResponse, TokenHandler
from mcp.server.auth.json_response import PydanticJSONResponse
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, RequireAuthMiddleware
from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.provider import RegistrationError
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from . import limits, profiles
from .tokens import digest, new_client_id, new_secret, same

SCOPES = ["mcp:full"]
GRANTS = {"authorization_code", "refresh_token", "client_credentials"}
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


class HashedClientAuthenticator(ClientAuthenticator):
    async def authenticate_request(self, request: Request) -> OAuthClientInformationFull:
        form = await request.form()
        client_id = form.get("client_id")
        presented: str | None = None
        header = request.headers.get("Authorization", "")
        if header.startswith("Basic "):
            try:
                basic_id, presented = base64.b64decode(header[6:]).decode("utf-8").split(":", 1)
            except (ValueError, UnicodeDecodeError, binascii.Error):
                raise AuthenticationError("Invalid Basic authentication header") from None
            basic_id, presented = unquote(basic_id), unquote(presented)
            if client_id and basic_id != client_id:
                raise AuthenticationError("Client ID mismatch in Basic auth")
            client_id = basic_id
        elif isinstance(form.get("client_secret"), str):
            presented = str(form.get("client_secret"))
        if not isinstance(client_id, str) or not client_id:
            raise AuthenticationError("Missing client_id")
        client = await self.provider.get_client(client_id)
        if client is None:
            raise AuthenticationError("Invalid client_id (unknown or revoked)")
        method = client.token_endpoint_auth_method
        if method == "client_secret_basic" and not header.startswith("Basic "):
            raise AuthenticationError("Missing or invalid Basic authentication in Authorization header")
        if method != "none" or client.client_secret:
            if not client.client_secret:
                raise AuthenticationError("Client is registered for secret-based authentication but has no secret")
            if not presented or not same(digest(presented), client.client_secret):
                raise AuthenticationError("Invalid client_secret")
        return client


class VantageTokenHandler(TokenHandler):
    async def handle(self, request: Request) -> Response:
        form = await request.form()  # Starlette caches the parsed form: the SDK handler reads it again
        if form.get("grant_type") != "client_credentials":
            return await super().handle(request)
        try:
            client = await self.client_authenticator.authenticate_request(request)
        except AuthenticationError as exc:
            return PydanticJSONResponse(TokenErrorResponse(error="invalid_client", error_description=exc.message),
                                        status_code=401, headers=NO_STORE)
        if "client_credentials" not in client.grant_types or not client.client_secret:
            return self.response(TokenErrorResponse(
                error="unauthorized_client",
                error_description="this client is not registered for client_credentials (a confidential "
                                  "client with grant_types including client_credentials is required)"))
        scope = form.get("scope")
        scopes = str(scope).split() if isinstance(scope, str) and scope.strip() else (client.scope or "").split()
        allowed = set((client.scope or "").split())
        if not set(scopes) <= allowed:
            return self.response(TokenErrorResponse(error="invalid_scope",
                                                    error_description=f"client was not registered with {scopes}"))
        resource = form.get("resource")
        tokens = await self.provider.exchange_client_credentials(  # type: ignore[attr-defined]
            client, scopes, resource if isinstance(resource, str) else None)
        return self.response(tokens)


class VantageRegistrationHandler:
    def __init__(self, provider: Any, token_endpoint: str) -> None:
        self.provider = provider
        self.token_endpoint = token_endpoint

    @staticmethod
    def _error(description: str, error: str = "invalid_client_metadata") -> Response:
        return PydanticJSONResponse(RegistrationErrorResponse(error=error, error_description=description),  # type: ignore[arg-type]
                                    status_code=400)

    async def handle(self, request: Request) -> Response:
        try:
            raw = json.loads(await request.body())
        except ValueError:
            return self._error("the body must be a JSON object (RFC 7591 client metadata)")
        if not isinstance(raw, dict):
            return self._error("the body must be a JSON object (RFC 7591 client metadata)")
        problem = limits.metadata_problem(raw)  # #19: field caps and redirect URI schemes (http/limits.py)
        if problem:
            return self._error(problem, "invalid_redirect_uri" if "redirect URI" in problem else
                               "invalid_client_metadata")
        requested = raw.pop("scope_profile", None) or raw.pop("scopeProfile", None)
        if requested not in (None, profiles.CLIENT_GENERIC):
            return self._error(f"ScopeViolation: self-registration yields scope profile client-generic only; "
                               f"{requested!r} must be assigned by an operator (vantage-peers token …)")
        try:
            meta = OAuthClientMetadata.model_validate(raw)
        except ValidationError as exc:
            return self._error("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5]))
        method = meta.token_endpoint_auth_method or "client_secret_post"
        grants = list(dict.fromkeys(meta.grant_types))
        if method not in ("client_secret_post", "client_secret_basic", "none"):
            return self._error(f"token_endpoint_auth_method {method!r} is not supported")
        if not set(grants) <= GRANTS:
            return self._error(f"grant_types may hold only {sorted(GRANTS)}")
        if "client_credentials" in grants and method == "none":
            return self._error("client_credentials needs a confidential client (client_secret_post or _basic)")
        if "authorization_code" in grants and "code" not in meta.response_types:
            return self._error("response_types must include 'code' for the authorization_code grant")
        scope = meta.scope or " ".join(SCOPES)
        if not set(scope.split()) <= set(SCOPES):
            return self._error(f"scope may hold only {SCOPES}", "invalid_client_metadata")
        secret = None if method == "none" else new_secret()
        info = OAuthClientInformationFull.model_validate({
            **meta.model_dump(exclude_none=True), "client_id": new_client_id(), "client_secret": secret,
            "token_endpoint_auth_method": method, "grant_types": grants, "scope": scope,
            "client_id_issued_at": int(time.time()), **({"client_secret_expires_at": 0} if secret else {})})
        try:
            profile = await self.provider.register_public_client(info, requested)
        except RegistrationError as exc:
            return self._error(exc.error_description or exc.error, exc.error)
        body = {**info.model_dump(mode="json", exclude_none=True), "scope_profile": profile,
                "token_endpoint": self.token_endpoint}
        return JSONResponse(body, status_code=201, headers=NO_STORE)


class SpecRequireAuth(RequireAuthMiddleware):
    """401 = `WWW-Authenticate: Bearer resource_metadata="…", scope="mcp:full"` and the documented JSON
    body; a request that presented a token (rejected) also gets `error="invalid_token"` (RFC 6750 §3.1:
    no error code when no credentials were sent), so a client knows to drop it and re-authorize."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        presented = b"authorization" in headers
        if not isinstance(scope.get("user"), AuthenticatedUser):
            await self._challenge(send, presented=presented)
            return
        await super().__call__(scope, receive, send)

    async def _challenge(self, send: Send, *, presented: bool) -> None:
        header = f'Bearer resource_metadata="{self.resource_metadata_url}", scope="{" ".join(SCOPES)}"'
        if presented:
            header += ', error="invalid_token", error_description="the bearer token is invalid or expired"'
        await self._send(send, 401, header, {"error": "invalid_token",
                                             "error_description": "Bearer token is missing or invalid"})

    async def _send_auth_error(self, send: Send, status_code: int, error: str, description: str) -> None:
        header = f'Bearer resource_metadata="{self.resource_metadata_url}", scope="{" ".join(SCOPES)}"'
        if status_code == 403:
            header += f', error="{error}"'
        await self._send(send, status_code, header, {"error": error, "error_description": description}
                         if status_code != 401 else {"error": "invalid_token",
                                                     "error_description": "Bearer token is missing or invalid"})

    @staticmethod
    async def _send(send: Send, status_code: int, header: str, body_doc: dict[str, str]) -> None:
        body = json.dumps(body_doc).encode()
        await send({"type": "http.response.start", "status": status_code, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", header.encode())]})
        await send({"type": "http.response.body", "body": body})
