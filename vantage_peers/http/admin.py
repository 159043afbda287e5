"""Operator operations on clients and profiles: the master-only `/admin/oauth/*` routes and the CLI.

Routes (all `Authorization: Bearer <BEARER_SECRET_MASTER>`):
  GET    /admin/oauth/clients                      list live clients
  POST   /admin/oauth/clients                      create one with a chosen profile (secret shown once)
  POST   /admin/oauth/clients/{clientId}/profile   move a client to another profile (elevation)
  DELETE /admin/oauth/clients/{clientId}           revoke it and all its tokens atomically, with counts
  GET    /admin/oauth/profiles                     list scope profiles
  POST   /admin/oauth/profiles                     create or replace one
  POST   /admin/oauth/seed-profiles                insert the default profiles that are missing
"""

from __future__ import annotations

import json
import time
from typing import Any

import anyio.to_thread
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.shared.auth import OAuthClientInformationFull
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..core.errors import NotFound, VantageError
from ..core.ids import now_ms
from ..core.principal import Principal
from ..db import Database
from . import profiles, store
from .tokens import new_client_id, new_secret

NO_STORE = {"Cache-Control": "no-store"}


# -- operations shared by the routes and `vantage-peers token` --------------------------------------
def create_client(db: Database, *, name: str, profile: str, redirect_uris: list[str] | None = None,
                  grant_types: list[str] | None = None, auth_method: str = "client_secret_post",
                  via: str = "admin") -> dict[str, Any]:
    """A confidential client bound to `profile`; returns its id and secret (the secret only here)."""
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise VantageError("name must be a non-empty string of at most 200 characters", code="INVALID_ARGUMENT")
    grants = grant_types or (["authorization_code", "refresh_token", "client_credentials"] if redirect_uris
                             else ["client_credentials"])
    bad = set(grants) - {"authorization_code", "refresh_token", "client_credentials"}
    if bad or ("authorization_code" in grants and not redirect_uris):
        raise VantageError(f"grant_types {sorted(grants)} invalid (authorization_code needs redirect URIs)",
                           code="INVALID_ARGUMENT")
    if auth_method not in ("client_secret_post", "client_secret_basic"):
        raise VantageError("authMethod must be client_secret_post or client_secret_basic", code="INVALID_ARGUMENT")
    secret = new_secret()
    try:
        info = OAuthClientInformationFull(client_id=new_client_id(), client_secret=secret, client_name=name.strip(),
                                          redirect_uris=redirect_uris or None, grant_types=grants,
                                          token_endpoint_auth_method=auth_method, scope="mcp:full",
                                          client_id_issued_at=int(time.time()))
    except ValueError as exc:
        raise VantageError(f"redirectUris: {exc}", code="INVALID_ARGUMENT") from None
    from .provider import SqliteOAuthProvider

    provider = SqliteOAuthProvider(db, base_url="", access_ttl_s=0, refresh_ttl_s=0)
    db.write(lambda c: provider.create_client_sync(c, info, profile, via))
    return {"client_id": info.client_id, "client_secret": secret, "client_name": info.client_name,
            "scope_profile": profile, "grant_types": grants, "redirect_uris": redirect_uris or []}


def revoke_client(db: Database, client_id: str) -> dict[str, Any]:
    return db.write(lambda c: store.revoke_client(c, client_id, now=now_ms()))


def set_profile(db: Database, client_id: str, profile: str) -> dict[str, Any]:
    if profile == profiles.MASTER:
        raise VantageError("ScopeViolation: master belongs to BEARER_SECRET_MASTER only", code="SCOPE_VIOLATION")

    def run(conn: Any) -> None:
        profiles.require(conn, profile)
        store.set_client_profile(conn, client_id, profile)

    db.write(run)
    return {"clientId": client_id, "scopeProfile": profile}


def save_profile(db: Database, doc: dict[str, Any]) -> dict[str, Any]:
    profile = profiles.from_doc(doc)
    db.write(lambda c: profiles.upsert(c, profile))
    return profile.doc()


# -- routes ---------------------------------------------------------------------------------------------
def _master(request: Request) -> Response | None:
    user = request.scope.get("user")
    token = user.access_token if isinstance(user, AuthenticatedUser) else None
    if not isinstance(token, Principal):
        return JSONResponse({"error": "invalid_token", "error_description": "Bearer token is missing or invalid"},
                            status_code=401, headers={"WWW-Authenticate": "Bearer"})
    if not token.is_master:
        return JSONResponse({"error": "forbidden", "error_description": "FORBIDDEN: admin routes need the master "
                             f"bearer (this token has profile {token.profile.profile_id})"}, status_code=403)
    return None


async def _json(request: Request) -> dict[str, Any]:
    body = await request.body()
    if not body:
        return {}
    doc = json.loads(body)
    if not isinstance(doc, dict):
        raise ValueError("the body must be a JSON object")
    return doc


async def _master_body(request: Request) -> tuple[Response | None, dict[str, Any]]:
    """(refusal, None) for a non-master caller, else (None, the JSON body — {} when absent or bad)."""
    denied = _master(request)
    if denied is not None:
        return denied, {}
    try:
        return None, await _json(request)
    except ValueError:
        return None, {}


def admin_routes(db: Database) -> list[Route]:
    async def run(request: Request, fn: Any, status: int = 200) -> Response:
        denied = _master(request)
        if denied is not None:
            return denied
        try:
            result = await anyio.to_thread.run_sync(fn)
        except NotFound as exc:
            return JSONResponse({"error": "not_found", "error_description": str(exc)}, status_code=404)
        except VantageError as exc:
            return JSONResponse({"error": "invalid_request", "error_description": str(exc)}, status_code=400)
        return JSONResponse(result, status_code=status, headers=NO_STORE)

    async def clients(request: Request) -> Response:
        if request.method == "GET":
            return await run(request, lambda: {"items": db.read(lambda c: store.list_clients(c, now=now_ms()))})
        denied = _master(request)
        if denied is not None:
            return denied
        try:
            doc = await _json(request)
        except ValueError:
            return JSONResponse({"error": "invalid_request", "error_description": "the body must be a JSON object"},
                                status_code=400)
        return await run(request, lambda: create_client(
            db, name=doc.get("name") or doc.get("client_name") or "", profile=doc.get("scopeProfile") or "",
            redirect_uris=doc.get("redirectUris") or doc.get("redirect_uris"),
            grant_types=doc.get("grantTypes") or doc.get("grant_types"),
            auth_method=doc.get("authMethod") or "client_secret_post"), status=201)

    async def client(request: Request) -> Response:
        client_id = request.path_params["client_id"]
        return await run(request, lambda: revoke_client(db, client_id))

    async def client_profile(request: Request) -> Response:
        denied, doc = await _master_body(request)
        if denied is not None:
            return denied
        return await run(request, lambda: set_profile(db, request.path_params["client_id"],
                                                      str(doc.get("scopeProfile") or "")))

    async def profile_list(request: Request) -> Response:
        if request.method == "GET":
            return await run(request, lambda: {"items": [p.doc() for p in db.read(profiles.list_all)]})
        denied, doc = await _master_body(request)
        if denied is not None:
            return denied
        return await run(request, lambda: save_profile(db, doc))

    async def seed(request: Request) -> Response:
        def go() -> dict[str, Any]:
            seeded = db.write(profiles.seed_defaults)
            return {"seeded": seeded, "profiles": [p.profile_id for p in db.read(profiles.list_all)]}

        return await run(request, go)

    return [
        Route("/admin/oauth/clients", clients, methods=["GET", "POST"]),
        Route("/admin/oauth/clients/{client_id}", client, methods=["DELETE"]),
        Route("/admin/oauth/clients/{client_id}/profile", client_profile, methods=["POST"]),
        Route("/admin/oauth/profiles", profile_list, methods=["GET", "POST"]),
        Route("/admin/oauth/seed-profiles", seed, methods=["POST"]),
    ]
