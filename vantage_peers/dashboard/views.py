"""The read-only views. Each reads one snapshot and renders one template; every filter and the
page cursor are query parameters, so any view state is a link."""

from __future__ import annotations

from typing import Any

import anyio
from starlette.responses import Response

from ..domains.memory.services import MemoryServices
from ..domains.tasks.rules import PRIORITIES
from . import queries as q
from . import queries_work as w
from .web import Config, Ctx, require

ACTIVITY_KINDS = tuple(q.ACTIVITY_SOURCES)


class Views:
    def __init__(self, cfg: Config, memory: MemoryServices | None = None) -> None:
        self.cfg = cfg
        self.db = cfg.db
        self._memory = memory

    async def read(self, fn: Any) -> Any:
        """One read snapshot, in a worker thread: a query never blocks the event loop (the live
        streams and, under `serve`, the MCP endpoint share it)."""
        return await anyio.to_thread.run_sync(self.db.read, fn)

    async def team(self, ctx: Ctx) -> Response:
        state = ctx.arg("state")
        state = state if state in q.PRESENCE else None
        who, cursor = ctx.arg("who"), ctx.arg("cursor", 2_000)
        page = await self.read(lambda c: q.team(c, now=ctx.now, state=state, who=who, cursor=cursor,
                                                readers=ctx.scope.readers))
        return ctx.render("team.html", view="team", page=page, state=state, who=who)

    async def messages(self, ctx: Ctx) -> Response:
        f = {"channel": ctx.arg("channel"), "sender": ctx.arg("from"), "recipient": ctx.arg("to"),
             "unread_only": ctx.flag("unread"), "unacked_only": ctx.flag("unacked"), "dead_only": ctx.flag("dead")}
        cursor = ctx.arg("cursor", 2_000)

        def read(c):
            readers = ctx.scope.readers
            return q.messages(c, cursor=cursor, readers=readers, **f), q.channels(c, readers=readers)

        page, channels = await self.read(read)
        return ctx.render("messages.html", view="messages", page=page, channels=channels, f=f,
                          columns=q.RECEIPT_COLUMNS)

    async def message(self, ctx: Ctx) -> Response:
        message_id = ctx.request.path_params["message_id"]
        msg = require(await self.read(lambda c: q.message_detail(c, message_id, ctx.scope.readers)),
                      f"message {message_id}")
        return ctx.render("message.html", view="messages", msg=msg)

    async def tasks(self, ctx: Ctx) -> Response:
        f = {"assignee": ctx.arg("assignee"), "mission": ctx.arg("mission"), "priority": ctx.arg("priority"),
             "overdue": ctx.flag("overdue")}
        blocked, status, cursor = ctx.flag("blocked"), ctx.arg("status"), ctx.arg("cursor", 2_000)

        def read(c):
            readers = ctx.scope.readers
            if status or cursor:  # one column as a paged list
                return None, w.task_list(c, status=status, cursor=cursor, now=ctx.now, readers=readers, **f)
            return w.task_board(c, blocked=blocked, now=ctx.now, readers=readers, **f), None

        board, page = await self.read(read)
        return ctx.render("tasks.html", view="tasks", board=board, page=page, f=f, blocked=blocked, status=status,
                          priorities=PRIORITIES)

    async def task(self, ctx: Ctx) -> Response:
        task_id = ctx.request.path_params["task_id"]
        task = require(await self.read(lambda c: w.task_detail(c, task_id, ctx.scope.readers)), f"task {task_id}")
        return ctx.render("task.html", view="tasks", task=task)

    async def missions(self, ctx: Ctx) -> Response:
        f = {"status": ctx.arg("status"), "pilot": ctx.arg("pilot"), "project": ctx.arg("project")}
        cursor = ctx.arg("cursor", 2_000)
        page = await self.read(lambda c: w.mission_list(c, cursor=cursor, **f))
        return ctx.render("missions.html", view="missions", page=page, f=f)

    async def mission(self, ctx: Ctx) -> Response:
        mission_id = ctx.request.path_params["mission_id"]
        cursor = ctx.arg("cursor", 2_000)
        mission = require(await self.read(lambda c: w.mission_detail(c, mission_id, cursor=cursor,
                                                                     readers=ctx.scope.readers)),
                          f"mission {mission_id}")
        return ctx.render("mission.html", view="missions", mission=mission)

    async def schedule(self, ctx: Ctx) -> Response:
        assignee, paused, cursor = ctx.arg("assignee"), ctx.arg("paused"), ctx.arg("cursor", 2_000)
        data = await self.read(lambda c: w.schedule(c, assignee=assignee, paused=paused, cursor=cursor, now=ctx.now))
        return ctx.render("schedule.html", view="schedule", data=data, assignee=assignee, paused=paused)

    def memory_services(self) -> MemoryServices:
        if self._memory is None:
            self._memory = MemoryServices(self.cfg.settings)
        return self._memory

    async def memory(self, ctx: Ctx) -> Response:
        query, namespace = ctx.arg("q", 2_000), ctx.arg("namespace", 210)
        prefixes = ctx.scope.prefixes
        types = [t for t in ctx.request.query_params.getlist("type") if t][:10]
        cursor = ctx.arg("cursor", 2_000)
        if query:
            # The query embeds off the event loop (it may call an endpoint, with its short timeout).
            vector, reason = await anyio.to_thread.run_sync(
                lambda: self.memory_services().query_vector(self.db, query))
            result = await self.read(lambda c: w.memory_search(c, query=query, vector=vector, reason=reason,
                                                               namespace=namespace, types=types, now=ctx.now,
                                                               prefixes=prefixes))
            page = None
        else:
            result = None
            page = await self.read(lambda c: w.memory_list(c, namespace=namespace, types=types, cursor=cursor,
                                                           now=ctx.now, prefixes=prefixes))
        known = await self.read(lambda c: w.memory_types(c, prefixes))
        return ctx.render("memory.html", view="memory", result=result, page=page, query=query, namespace=namespace,
                          types=types, known_types=known)

    async def claims(self, ctx: Ctx) -> Response:
        holder, cursor = ctx.arg("holder"), ctx.arg("cursor", 2_000)

        def read(c):
            readers = ctx.scope.readers
            return (q.task_claims(c, holder=holder, cursor=cursor, now=ctx.now, readers=readers),
                    q.lease_rows(c, now=ctx.now, readers=readers))

        page, leases = await self.read(read)
        return ctx.render("claims.html", view="claims", page=page, leases=leases, holder=holder)

    async def activity(self, ctx: Ctx) -> Response:
        kinds = [k for k in ctx.request.query_params.getlist("kind") if k in ACTIVITY_KINDS]
        cursor = ctx.arg("cursor", 2_000)
        page = await self.read(lambda c: q.activity(c, kinds=kinds or None, cursor=cursor, now=ctx.now,
                                                    readers=ctx.scope.readers, prefixes=ctx.scope.prefixes))
        return ctx.render("activity.html", view="activity", page=page, kinds=kinds, all_kinds=ACTIVITY_KINDS)
