"""The request context of every dashboard page: Host check, session, language, rendering, headers.

`page(cfg, handler)` wraps a view: it refuses a foreign Host, finds (or, on loopback, issues) the
session, sends an unauthenticated visitor behind `serve` to the sign-in page, renders the
template — only the `live` fragment when the live script asks (`X-Partial: 1`) — and adds the
security headers. `action(cfg, handler)` wraps a form POST: Origin and CSRF checked first, then the
action; a `VantageError` becomes an error page with its coded message.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ..core.errors import Forbidden, InvalidArgument, NotFound, VantageError
from ..db import Database
from . import i18n, login
from .live import Hub
from .scope import Scope
from .security import (
    COOKIE,
    HEADERS,
    SESSION_SECONDS,
    Session,
    Signer,
    host_allowed,
    local_key,
    origin_allowed,
)

TEMPLATES = Path(__file__).parent / "templates"
STATUS = {"NOT_FOUND": 404, "RBAC_DENIED": 403, "LOGIN_FAILED": 403, "INVALID_STATE": 409, "CONFLICT": 409,
          "CSRF": 403, "BAD_ORIGIN": 403}


@dataclass
class Config:
    db: Database
    settings: Any
    login_required: bool  # behind `serve` with auth; False only on a loopback bind
    loopback: bool
    local_name: str = "operator"
    public_host: str | None = None
    signer: Signer = field(init=False)
    hub: Hub = field(init=False)
    env: Environment = field(init=False)

    def __post_init__(self) -> None:
        if not self.login_required and not self.loopback:
            raise ValueError("the dashboard is never served without sign-in on a non-loopback address")
        if self.login_required:
            self.signer = Signer(self.settings.bearer_secret_master)
        else:
            self.signer = Signer(None, key=local_key(self.db))
        self.hub = Hub(self.db)
        self.env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(default=True),
                               trim_blocks=True, lstrip_blocks=True)
        self.env.filters["when"] = when
        self.env.filters["ago"] = ago


def when(ms: int | None) -> str:
    if not ms:
        return "—"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(ms: int | None) -> str:
    if not ms:
        return "—"
    s = int(max(0, time.time() - ms / 1000))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            return f"{s // size} {unit}"
    return f"{s} s"


class Ctx:
    """One request: its session, language and helpers the templates use."""

    def __init__(self, cfg: Config, request: Request, session: Session, scope: Scope) -> None:
        self.cfg, self.request, self.session = cfg, request, session
        self.scope = scope  # what this person may read and do (scope.py): every view and action reads it
        q = request.query_params
        self.lang = i18n.pick(q.get("lang"), request.cookies.get("vp_lang"), request.headers.get("accept-language"))
        self.t = i18n.translator(self.lang)
        self.root = request.scope.get("root_path", "")
        self.now = int(time.time() * 1000)
        self.set_lang = q.get("lang") in i18n.LANGS

    def arg(self, name: str, max_chars: int = 500) -> str | None:
        value = self.request.query_params.get(name)
        if value is None or not value.strip():
            return None
        if len(value) > max_chars or any(ord(ch) < 32 for ch in value):
            raise InvalidArgument(f"{name} must be at most {max_chars} printable characters")
        return value.strip()

    def flag(self, name: str) -> bool:
        return self.request.query_params.get(name) in ("1", "on", "true", "yes")

    def url(self, path: str, **params: Any) -> str:
        clean = {k: v for k, v in params.items() if v not in (None, "", False)}
        return self.root + path + ("?" + urlencode(clean, doseq=True) if clean else "")

    def here(self, **changes: Any) -> str:
        """This page's URL with some query parameters changed (None drops one)."""
        params = dict(self.request.query_params)
        params.pop("ok", None)
        params.update(changes)
        return self.url(self.request.url.path[len(self.root):] or "/", **params)

    def render(self, template: str, code: int = 200, **values: Any) -> Response:
        partial = self.request.headers.get("x-partial") == "1"
        html = self.cfg.env.get_template(template).render(
            ctx=self, t=self.t, lang=self.lang, partial=partial, csrf=self.cfg.signer.csrf(self.session),
            operator=self.session, scope=self.scope, login_required=self.cfg.login_required, now=self.now,
            **values)
        return HTMLResponse(html, status_code=code)


def _finish(cfg: Config, ctx: Ctx | None, response: Response, cookie: str | None) -> Response:
    for key, value in HEADERS.items():
        response.headers.setdefault(key, value)
    secure = ctx is not None and ctx.request.url.scheme == "https"
    path = (ctx.root if ctx else "") or "/"
    if cookie is not None:
        response.set_cookie(COOKIE, cookie, max_age=SESSION_SECONDS, httponly=True, samesite="strict",
                            secure=secure, path=path)
    if ctx is not None and ctx.set_lang:
        response.set_cookie("vp_lang", ctx.lang, max_age=365 * 86400, samesite="strict", secure=secure, path=path)
    return response


def _session(cfg: Config, request: Request) -> tuple[Session, Scope, str | None]:
    """(session, its scope, cookie to set). Loopback without login: a session is issued on the first
    visit. A client's session ends as soon as the client is revoked."""
    found = cfg.signer.read(request.cookies.get(COOKIE))
    if found is not None:
        scope = login.session_scope(cfg.db, found.via if cfg.login_required else "loopback", found.name)
        if scope is not None:
            return found, scope, None
    if not cfg.login_required:
        cookie, session = cfg.signer.issue(cfg.local_name, "loopback")
    else:
        cookie, session = cfg.signer.issue("", "anonymous")  # carries the sign-in form's CSRF token only
    scope = login.session_scope(cfg.db, session.via, session.name)
    assert scope is not None
    return session, scope, cookie


def _plain(status: int, text: str) -> Response:
    response = Response(text + "\n", status_code=status, media_type="text/plain; charset=utf-8")
    for key, value in HEADERS.items():
        response.headers[key] = value
    return response


def error_page(ctx: Ctx, exc: VantageError) -> Response:
    return ctx.render("error.html", code=STATUS.get(exc.code, 400), error=str(exc))


Handler = Callable[[Ctx], Awaitable[Response]]


def page(cfg: Config, handler: Handler, *, public: bool = False) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        if not host_allowed(request, loopback=cfg.loopback, public_host=cfg.public_host):
            return _plain(400, "BAD_HOST: this dashboard answers only to its own host name")
        session, scope, cookie = _session(cfg, request)
        ctx = Ctx(cfg, request, session, scope)
        if cfg.login_required and session.via == "anonymous" and not public:
            if request.headers.get("accept") == "text/event-stream" or request.url.path.endswith("/events"):
                return _finish(cfg, ctx, _plain(401, "LOGIN_REQUIRED: sign in at /dashboard/login"), cookie)
            target = ctx.url("/login", next=request.url.path + (f"?{request.url.query}" if request.url.query else ""))
            return _finish(cfg, ctx, RedirectResponse(target, status_code=303), cookie)
        try:
            response = await handler(ctx)
        except VantageError as exc:
            response = error_page(ctx, exc)
        return _finish(cfg, ctx, response, cookie)

    return endpoint


def action(cfg: Config, handler: Handler, *, public: bool = False) -> Callable[[Request], Awaitable[Response]]:
    """A form POST: Origin, then CSRF token, then (signed in) the handler; answers with a redirect."""
    async def run(ctx: Ctx) -> Response:
        if not origin_allowed(ctx.request):
            raise Forbidden("a form may only be posted from this dashboard's own pages", code="BAD_ORIGIN")
        form = await ctx.request.form(max_files=0, max_fields=20)
        ctx.form = form  # type: ignore[attr-defined]
        if not cfg.signer.csrf_ok(ctx.session, form.get("csrf")):
            raise Forbidden("the form's security token is missing or stale; reload the page and try again",
                            code="CSRF")
        return await handler(ctx)

    return page(cfg, run, public=public)


def back_to(ctx: Ctx, default: str, **params: Any) -> Response:
    """303 to a local path named by the form's `next` (never to another site)."""
    target = ctx.form.get("next") if hasattr(ctx, "form") else None  # type: ignore[attr-defined]
    if not isinstance(target, str) or not target.startswith(ctx.root + "/") or target.startswith("//") \
            or "\\" in target or any(ord(ch) < 32 for ch in target):
        target = ctx.url(default)
    sep = "&" if "?" in target else "?"
    return RedirectResponse(target + (sep + urlencode(params) if params else ""), status_code=303)


def require(value: Any, what: str) -> Any:
    if value is None:
        raise NotFound(f"{what} does not exist")
    return value
