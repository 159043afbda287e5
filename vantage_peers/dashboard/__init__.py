"""The web dashboard: a live view of the team for the people who run the agents.

An entry point in the layering: it reads through the domain stores and `db`, and nothing imports it
except `cli.py` (`vantage-peers dashboard`) and `http/serve.py` (mounted at `/dashboard`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..db import Database
from .forms import Forms
from .views import Views
from .web import TEMPLATES, Config, Ctx, action, page

STATIC = TEMPLATES.parent / "static"

__all__ = ["Config", "build_dashboard"]


def build_dashboard(db: Database, settings: Any, *, login_required: bool, loopback: bool,
                    local_name: str = "operator", public_host: str | None = None, memory: Any = None) -> Starlette:
    """The dashboard app. `memory`: the MemoryServices to embed search queries with (`serve` passes
    its own, so the process loads one embedding model, not two); default: one of its own."""
    cfg = Config(db=db, settings=settings, login_required=login_required, loopback=loopback,
                 local_name=local_name, public_host=public_host)
    views, forms = Views(cfg, memory), Forms(cfg)

    async def home(ctx: Ctx) -> Response:
        return RedirectResponse(ctx.url("/team"), status_code=303)

    async def stream(ctx: Ctx) -> Response:
        return await cfg.hub.stream(ctx.request)

    get = {"/": home, "/team": views.team, "/messages": views.messages, "/tasks": views.tasks,
           "/missions": views.missions, "/schedule": views.schedule, "/memory": views.memory,
           "/claims": views.claims, "/activity": views.activity, "/messages/{message_id}": views.message,
           "/tasks/{task_id}": views.task, "/missions/{mission_id}": views.mission, "/events": stream}
    routes: list[Any] = [Route(path, page(cfg, fn), methods=["GET"]) for path, fn in get.items()]
    routes += [
        Route("/login", page(cfg, forms.login_page, public=True), methods=["GET"]),
        Route("/login", action(cfg, forms.login, public=True), methods=["POST"]),
        Route("/logout", action(cfg, forms.logout), methods=["POST"]),
        Route("/actions/send", action(cfg, forms.send), methods=["POST"]),
        Route("/actions/tasks/{task_id}/{verb:str}", action(cfg, forms.task_action), methods=["POST"]),
        Route("/actions/recurring/{template_id}/{verb:str}", action(cfg, forms.recurring_action),
              methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            cfg.hub.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.dashboard = cfg
    return app
