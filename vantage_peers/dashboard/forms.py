"""The POST endpoints: sign in / out and the actions a person takes (see actions.py)."""

from __future__ import annotations

import functools
from typing import Any

import anyio
from starlette.responses import RedirectResponse, Response

from ..core.errors import Forbidden, NotFound
from . import actions
from .actions import Operator
from .login import check_login
from .security import COOKIE
from .web import Config, Ctx, back_to


def _field(ctx: Ctx, name: str) -> Any:
    value = ctx.form.get(name)  # type: ignore[attr-defined]
    return value if isinstance(value, str) else None


async def _off_loop(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """A write transaction in a worker thread (it may wait for another process's lock)."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


def _op(ctx: Ctx) -> Operator:
    """The person acting; refused when their client may not act as `human:<name>` (scope.py)."""
    if not ctx.scope.acts:
        raise Forbidden(f"the client {ctx.session.via} may read but not act: its scope profile's fromAllowList "
                        f"needs '*' or 'human:{ctx.session.name}'")
    return Operator(ctx.session.name, ctx.session.via, ctx.scope.readers)


TASK_VERBS = ("reassign", "unblock", "cancel", "release")


class Forms:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.db = cfg.db

    # -- sign in --------------------------------------------------------------------------------
    async def login_page(self, ctx: Ctx) -> Response:
        if ctx.session.via != "anonymous":
            return RedirectResponse(ctx.url("/team"), status_code=303)
        return ctx.render("login.html", view="login", next=ctx.arg("next", 2_000) or "")

    async def login(self, ctx: Ctx) -> Response:
        name = actions.check_name(_field(ctx, "name"))
        via = await _off_loop(check_login, self.db, master_secret=self.cfg.settings.bearer_secret_master, name=name,
                          secret=_field(ctx, "secret") or "", client_id=(_field(ctx, "client_id") or "").strip())
        cookie, _ = self.cfg.signer.issue(name, via)
        response = back_to(ctx, "/team")
        response.set_cookie(COOKIE, cookie, max_age=12 * 3600, httponly=True, samesite="strict",
                            secure=ctx.request.url.scheme == "https", path=ctx.root or "/")
        return response

    async def logout(self, ctx: Ctx) -> Response:
        response = RedirectResponse(ctx.url("/login" if self.cfg.login_required else "/team"), status_code=303)
        response.delete_cookie(COOKIE, path=ctx.root or "/")
        return response

    # -- stepping in ----------------------------------------------------------------------------
    async def send(self, ctx: Ctx) -> Response:
        sent = await _off_loop(actions.send_message, self.db, _op(ctx), channel=_field(ctx, "to"),
                               content=_field(ctx, "content"))
        return back_to(ctx, "/messages", ok="sent", id=sent["messageId"])

    async def task_action(self, ctx: Ctx) -> Response:
        task_id, verb = ctx.request.path_params["task_id"], ctx.request.path_params["verb"]
        op, settings = _op(ctx), self.cfg.settings
        if verb not in TASK_VERBS:
            raise NotFound(f"no task action {verb!r}; one of {', '.join(TASK_VERBS)}")
        if verb == "reassign":
            await _off_loop(actions.reassign_task, self.db, op, settings, task_id=task_id, assignee=_field(ctx, "assignee"))
        elif verb == "unblock":
            await _off_loop(actions.unblock_task, self.db, op, settings, task_id=task_id)
        elif verb == "cancel":
            await _off_loop(actions.cancel_task, self.db, op, settings, task_id=task_id, reason=_field(ctx, "reason"))
        elif verb == "release":
            await _off_loop(actions.release_claim, self.db, op, settings, task_id=task_id)
        return back_to(ctx, f"/tasks/{task_id}", ok=verb)

    async def recurring_action(self, ctx: Ctx) -> Response:
        template_id, verb = ctx.request.path_params["template_id"], ctx.request.path_params["verb"]
        if verb not in ("pause", "resume"):
            raise NotFound(f"no recurring task action {verb!r}; pause or resume")
        if verb == "pause":
            await _off_loop(actions.pause_recurring, self.db, _op(ctx), template_id=template_id)
        else:
            await _off_loop(actions.resume_recurring, self.db, _op(ctx), template_id=template_id)
        return back_to(ctx, "/schedule", ok=verb)
