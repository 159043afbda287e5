"""MCP tools for profiles and presence."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ...core.ids import now_ms
from ...core.validators import require_text
from ...db.paging import Fields
from ...pipeline.app import App
from ..leases import store as leases
from . import liveness, processes, store
from .models import DynamicProfile, StaticProfile


def register(app: App) -> None:
    db = app.db
    process = liveness.state_of(app)
    app.before_call(liveness.first_answer(app))  # binds the session; the first answer tells what is inherited
    # Presence renews the leases of this process's session (bound for stdio calls) and session-less ones.
    app.on_presence(lambda c, orch, inst: store.touch(c, orchestrator_id=orch, instance_id=inst,
                                                      session=leases.holder_session()))
    app.add_job("processes-prune", lambda: db.write(lambda c: processes.prune(c, now_ms())), every_seconds=3600)

    @app.tool("read", subject="orchestratorId")
    def get_profile(orchestratorId: str | None = None) -> dict[str, Any] | None:
        """Fetch an orchestrator's profile: identity, state, summary and instances."""
        who = orchestratorId
        return db.read(lambda c: store.get_profile(c, orchestrator_id=who))

    @app.tool("idempotent", identity="orchestratorId", instance="instanceId")
    def update_profile(
        orchestratorId: str | None = None,
        name: Annotated[str | None, Field(max_length=500)] = None,
        instanceId: str | None = None,
        static: StaticProfile | None = None,
        dynamic: DynamicProfile | None = None,
    ) -> dict[str, Any]:
        """Create or update an orchestrator profile (`static` merges; `dynamic` goes to `instanceId`); returns it."""
        who = orchestratorId
        inst = instanceId
        return db.write(
            lambda c: store.update_profile(
                c,
                orchestrator_id=who,
                name=name,
                instance_id=inst,
                static=static.model_dump(exclude_none=True) if static else None,
                dynamic=dynamic.model_dump(exclude_none=True) if dynamic else None,
            )
        )

    @app.tool("idempotent", identity="orchestratorId", instance="instanceId")
    def set_summary(
        summary: str, orchestratorId: str | None = None, instanceId: str | None = None
    ) -> dict[str, Any]:
        """Say what this instance is working on (for list_peers) and refresh presence; returns `{ok, lastSeen}`."""
        who = orchestratorId
        inst = instanceId or ""
        text = require_text(summary, "summary", max_bytes=10_000)
        row = db.write(lambda c: store.set_summary(c, orchestrator_id=who, instance_id=inst, summary=text))
        label = f"{who}/{inst}" if inst else who
        return {
            "ok": True,
            "message": f"Summary set for {label}.",
            "orchestratorId": who,
            **({"instanceId": inst} if inst else {}),
            "summary": text,
            "lastSeen": row["lastSeen"],
        }

    @app.tool("read")
    def list_peers(limit: int | None = None, cursor: str | None = None, fields: Fields = "full") -> dict[str, Any]:
        """List agent instances with summary and lastSeen, most recently seen first."""
        return db.read(lambda c: store.list_peers(c, limit=limit, cursor=cursor, fields=fields))

    @app.tool("read", open=True)
    def whoami() -> dict[str, Any]:
        """Return the identity this server acts as (VP_ORCHESTRATOR, VP_INSTANCE_ID)."""
        actor = app.actor()  # over HTTP: the identity the token carries
        who = actor.identity
        if not who:
            return {
                "configured": False,
                "hint": "start the server with VP_ORCHESTRATOR=<your id> to act as one orchestrator",
            }
        out: dict[str, Any] = {"configured": True, "orchestratorId": who}
        if actor.instance:
            out["instanceId"] = actor.instance
        profile = db.read(lambda c: store.get_profile(c, orchestrator_id=who))
        if profile:
            out["profile"] = profile
        if who == app.settings.orchestrator and leases.holder_session() == process.me.session:
            # This stdio process's own identity: its session, and the leases it inherits from a gone
            # process of that identity (the list its first answer carried, as it stands now).
            out["session"] = process.me.session
            out["inheritedLeases"] = liveness.check(app, process, who, for_notice=False)
        return out
