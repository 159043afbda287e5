"""The Starlette app `serve` runs: the MCPServer's streamable HTTP endpoint behind bearer auth, the
OAuth authorization server, the well-known documents, /health, admin and Clerk routes, and every
route other modules registered with `app.add_route` (GitHub webhook, …).

Built from the SDK's pieces: `MCPServer.streamable_http_app()` (its `/mcp` endpoint and session
manager), `BearerAuthBackend` + `AuthContextMiddleware` (the principal of each request, carried into
tool calls), `RequireAuthMiddleware` (401 on /mcp), `AuthorizationHandler`, `TokenHandler`,
`RevocationHandler`, `MetadataHandler` and `ProtectedResourceMetadataHandler`. The SDK's
`create_auth_routes` is not used because it hard-codes `/authorize`, `/token`…, while §30.2
publishes them under `/oauth/` (the bare paths are kept as aliases).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlparse

from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.revoke import RevocationHandler
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from mcp.server.auth.routes import build_metadata
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    RequestBodyLimitMiddleware,
    TransportSecuritySettings,
)
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, request_response

from .. import __version__
from . import limits as oauth_limits
from .admin import admin_routes
from .cimd_http import CimdFetchLimit, cimd_authorize
from .cimd_mode import CimdPolicy, mode_from_env
from .clerk import ClerkExchange
from .consent import ConsentPage
from .handlers import (
    SCOPES,
    HashedClientAuthenticator,
    SpecRequireAuth,
    VantageRegistrationHandler,
    VantageTokenHandler,
)
from .health import healthz, readyz
from .logs import RequestIdMiddleware
from .metrics import Metrics, SseStreams, loopback_only, metrics_endpoint
from .metrics_db import DatabaseCollector
from .origin import OriginCheck
from .provider import SqliteOAuthProvider, VantageTokenVerifier
from .proxies import ClientAddress, trusted_from_env
from .push import PushEndpoint, PushHub
from .shared_limits import LimitStore

LOOPBACK = ("127.0.0.1", "localhost", "::1")
CORS_HEADERS = ["Content-Type", "Authorization", "mcp-session-id", "Last-Event-ID", "mcp-protocol-version",
                "X-Request-Id"]


def base_url(settings: Any, host: str, port: int) -> str:
    if settings.public_base_url:
        return settings.public_base_url.rstrip("/")
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


def health_body() -> dict[str, Any]:
    return {"status": "ok", "service": "vantage-peers-mcp-http", "version": __version__,
            "transport": "streamable-http", "oauth": "supported", "scopes": SCOPES}


def _security(host: str, public: str) -> TransportSecuritySettings | None:
    """DNS-rebinding protection on a loopback bind (the SDK's default), which also admits PUBLIC_BASE_URL."""
    if host not in LOOPBACK:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    parsed = urlparse(public)
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    if parsed.hostname and parsed.hostname not in LOOPBACK:
        hosts += [parsed.netloc, parsed.hostname]
        origins.append(f"{parsed.scheme}://{parsed.netloc}")
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=origins)


def _metadata_handler(model: Any, public: str, cimd: CimdPolicy | None = None) -> Any:
    """The SDK's metadata documents, with `issuer` exactly PUBLIC_BASE_URL (pydantic adds a '/'); the
    authorization server's offers CIMD only while `cimd` says so (VP_CIMD, #31)."""
    doc = model.model_dump(mode="json", exclude_none=True)
    if "issuer" in doc:
        doc["issuer"] = public
    if "authorization_servers" in doc:
        doc["authorization_servers"] = [public]
    without = {k: v for k, v in doc.items() if k != "client_id_metadata_document_supported"}
    # auto may change its mind: a client should not keep an hour-old answer
    cache = "no-cache" if cimd is not None and cimd.mode == "auto" else "public, max-age=3600"

    async def handle(_: Request) -> Response:
        body = doc if cimd is None or cimd.advertised() else without
        return JSONResponse(body, headers={"Cache-Control": cache})

    return handle


def _limited(handler: Any) -> Any:
    return RequestBodyLimitMiddleware(request_response(handler), DEFAULT_MAX_REQUEST_BODY_SIZE)


def build_http_app(app: Any, *, host: str, port: int, no_auth: bool = False) -> Starlette:
    settings = app.settings
    public = base_url(settings, host, port)
    mcp = app.mcp
    # Stateless: each POST stands alone (state lives in the database), so `curl … tools/list` works
    # without a session handshake and several serve processes can sit behind one load balancer.
    # JSON responses (not an SSE stream per POST): the tools send no server-to-client messages
    # mid-call, and a plain JSON body halves the per-call cost (benchmarks/http_transport.py).
    inner = mcp.streamable_http_app(streamable_http_path="/mcp", transport_security=_security(host, public),
                                    host=host, stateless_http=True, json_response=True)
    endpoint = next(r.endpoint for r in inner.routes if getattr(r, "path", None) == "/mcp")
    hub = PushHub(app)  # GET /mcp as an event stream: server push, resumable on any replica (#31, push.py)
    endpoint = PushEndpoint(endpoint, hub)

    async def health(_: Request) -> Response:
        return JSONResponse(health_body())

    # Issue #31, the operator's view: probes, /metrics (metrics.py), request ids and SSE streams counted.
    metrics = Metrics(app.registered)
    # MCPServer.middleware: the SDK's public hook around every MCP request (one per HTTP app built)
    mcp.middleware[:] = [m for m in mcp.middleware if not getattr(m, "vp_metrics", False)]
    mcp.middleware.append(metrics.observe_call)
    scrape = metrics_endpoint(metrics, [DatabaseCollector(app)], master=settings.bearer_secret_master,
                              open_locally=loopback_only(host, settings.public_base_url))
    routes: list[Any] = [Route("/health", health, methods=["GET"]), Route("/healthz", healthz, methods=["GET"]),
                         Route("/readyz", readyz(app), methods=["GET"]), Route("/metrics", scrape, methods=["GET"])]
    middleware: list[Middleware] = [Middleware(ClientAddress, trusted=trusted_from_env(os.environ)),  # #31
                                    Middleware(RequestIdMiddleware), Middleware(SseStreams, metrics=metrics),
                                    Middleware(CORSMiddleware, allow_origins=["*"], allow_headers=CORS_HEADERS,
                                               allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
                                               expose_headers=["mcp-session-id", "WWW-Authenticate", "X-Request-Id"])]
    if host in LOOPBACK:  # #19: Origin/Host parsed, not prefix-matched (the SDK's check admits 127.0.0.1:1@evil)
        middleware.append(Middleware(OriginCheck, public_base_url=public))
    if no_auth:
        routes.append(Route("/mcp", endpoint=endpoint))
    else:
        cimd_policy = CimdPolicy(mode_from_env(os.environ))  # VP_CIMD=on|off|auto (#31)
        provider = SqliteOAuthProvider(app.db, base_url=public, access_ttl_s=settings.access_token_ttl_seconds,
                                       refresh_ttl_s=settings.refresh_token_ttl_seconds,
                                       cimd_test_loopback=settings.cimd_test_loopback,  # CIMD (issue 24)
                                       cimd_policy=cimd_policy)
        verifier = VantageTokenVerifier(app.db, settings.bearer_secret_master)
        authenticator = HashedClientAuthenticator(provider)
        prm_url = AnyHttpUrl(f"{public}/.well-known/oauth-protected-resource")
        metadata = build_metadata(AnyHttpUrl(public), None, ClientRegistrationOptions(
            enabled=True, valid_scopes=SCOPES, default_scopes=SCOPES), RevocationOptions(enabled=True))
        metadata.authorization_endpoint = AnyHttpUrl(f"{public}/oauth/authorize")
        metadata.token_endpoint = AnyHttpUrl(f"{public}/oauth/token")
        metadata.registration_endpoint = AnyHttpUrl(f"{public}/oauth/register")
        metadata.revocation_endpoint = AnyHttpUrl(f"{public}/oauth/revoke")
        metadata.grant_types_supported = ["authorization_code", "refresh_token", "client_credentials"]
        metadata.client_id_metadata_document_supported = True  # CIMD (issue 24, http/cimd.py), per VP_CIMD; DCR stays
        # exactly the methods HashedClientAuthenticator accepts (public clients use `none`)
        metadata.token_endpoint_auth_methods_supported = ["client_secret_post", "client_secret_basic", "none"]
        metadata.revocation_endpoint_auth_methods_supported = ["client_secret_post", "client_secret_basic", "none"]
        prm = ProtectedResourceMetadata(resource=AnyHttpUrl(f"{public}/mcp"), authorization_servers=[AnyHttpUrl(public)],
                                        scopes_supported=SCOPES, resource_name="vantage-peers")
        prm_handler = _metadata_handler(prm, public)
        # per-address rate limits and failed-client-auth backoff (429 + Retry-After), see http/limits.py;
        # kept in the database, so every worker and replica shares them (#31, shared_limits.py)
        caps = oauth_limits.limiters(settings.oauth_register_per_minute, settings.oauth_token_per_minute)
        store = LimitStore(app.db)

        def refused(endpoint: str) -> Any:
            return metrics.rate_limited.labels(endpoint).inc

        fetches = CimdFetchLimit(store, caps["cimd"], refused("authorize"))  # CIMD fetches limited like DCR
        authorize = _limited(cimd_authorize(provider, AuthorizationHandler(provider).handle, fetches))
        token = oauth_limits.RateLimit(_limited(VantageTokenHandler(provider, authenticator).handle), store=store,
                                       buckets=caps["token"], backoff=True, refused=refused("token"))
        register = oauth_limits.RateLimit(
            RequestBodyLimitMiddleware(request_response(VantageRegistrationHandler(provider, f"{public}/oauth/token")
                                                        .handle), oauth_limits.MAX_REGISTRATION_BYTES),
            store=store, buckets=caps["register"], refused=refused("register"))
        revoke = _limited(RevocationHandler(provider, authenticator).handle)
        consent = _limited(ConsentPage(provider, secure_cookie=public.startswith("https://")).handle)
        clerk = ClerkExchange(app.db, issuer_domain=settings.clerk_jwt_issuer_domain,
                              allowed_ext_ids=settings.allowed_ext_ids)
        routes += [
            Route("/mcp", endpoint=SpecRequireAuth(endpoint, [], prm_url)),
            Route("/.well-known/oauth-protected-resource", prm_handler, methods=["GET", "OPTIONS"]),
            Route("/.well-known/oauth-protected-resource/mcp", prm_handler, methods=["GET", "OPTIONS"]),
            Route("/.well-known/oauth-authorization-server", _metadata_handler(metadata, public, cimd_policy),
                  methods=["GET", "OPTIONS"]),
            Route("/oauth/consent", consent, methods=["GET", "POST"]),
            Route("/issueBearerFromClerk", _limited(clerk.handle), methods=["POST", "OPTIONS"]),
            *admin_routes(app.db),
        ]
        for prefix in ("/oauth", ""):  # §30.2: /oauth/* advertised, the bare paths kept as aliases
            routes += [Route(f"{prefix}/authorize", authorize, methods=["GET", "POST"]),
                       Route(f"{prefix}/token", token, methods=["POST", "OPTIONS"]),
                       Route(f"{prefix}/register", register, methods=["POST", "OPTIONS"]),
                       Route(f"{prefix}/revoke", revoke, methods=["POST", "OPTIONS"])]
        middleware += [Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(verifier)),
                       Middleware(AuthContextMiddleware)]
    routes += list(app.routes)  # the extension point: webhooks and other modules' endpoints

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with mcp.session_manager.run():
            try:
                yield
            finally:
                hub.close()

    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
