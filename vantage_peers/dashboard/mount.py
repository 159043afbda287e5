"""The dashboard inside `vantage-peers serve`, at /dashboard.

Behind sign-in (the master secret, or an OAuth client whose profile grants the dashboard) unless
`serve --no-auth`, which `serve` itself allows only on a loopback host — so the dashboard is never
unauthenticated on a non-loopback address.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from starlette.applications import Starlette
from starlette.routing import Mount

from . import build_dashboard

PATH = "/dashboard"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def mount_dashboard(starlette: Starlette, app: Any, *, host: str, no_auth: bool) -> Starlette:
    settings = app.settings
    loopback = host in LOOPBACK
    if no_auth and not loopback:
        raise ValueError("serve --no-auth is loopback-only; the dashboard needs sign-in on " + host)
    public = urlparse(settings.public_base_url).netloc.lower() if settings.public_base_url else None
    from ..domains.memory.services import services

    dash = build_dashboard(app.db, settings, login_required=not no_auth, loopback=loopback, public_host=public,
                           memory=services(app))
    starlette.router.routes.append(Mount(PATH, app=dash))
    return dash
