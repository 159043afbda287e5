"""MCP tools for iframe embed sessions (spec §24) and the scheduler's cleanup job."""

from __future__ import annotations

from typing import Any

from ...core.errors import InvalidArgument
from ...core.ids import now_ms
from ...core.validators import check_name
from ...pipeline.app import App
from ...pipeline.policy import Owns, declared_loader
from . import store

CLEANUP_EVERY_SECONDS = 3600


def register(app: App) -> None:
    db = app.db
    app.add_record("embed session", declared_loader("embed session"))
    app.add_job("iframe-session-cleanup", lambda: db.write(lambda c: store.cleanup(c)),
                every_seconds=CLEANUP_EVERY_SECONDS)

    @app.tool("write", shared="the session id names the session being created", idempotent=True)
    def create_iframe_session(sessionId: str, origin: str, expiresAt: int, tenantId: str | None = None,
                              userId: str | None = None) -> str:
        """Create an embed session for the Gen UI iframe; returns its document id.

        `sessionId`: new, client-generated; `origin`: `scheme://host[:port]`; `expiresAt`: never extended.
        """
        sid = store.check_session_id(sessionId)
        where = store.check_origin(origin)
        now = now_ms()
        if isinstance(expiresAt, bool) or not isinstance(expiresAt, int) or expiresAt <= now:
            raise InvalidArgument("expiresAt must be a future Unix time in milliseconds (e.g. now + 30 min)")
        tenant = check_name(tenantId, "tenantId") if tenantId is not None else None
        user = check_name(userId, "userId") if userId is not None else None
        return db.write(lambda c: store.create_session(c, session_id=sid, origin=where, expires_at=expiresAt,
                                                       tenant_id=tenant, user_id=user,
                                                       created_by=app.actor().identity, now=now))

    @app.tool("write", owns=Owns("embed session", "sessionId", action="touch"))
    def touch_iframe_session(sessionId: str) -> bool:
        """Record embed activity (`lastSeenAt`, never `expiresAt`); returns false when gone, revoked or expired."""
        sid = store.check_session_id(sessionId)
        return db.write(lambda c: store.touch_session(c, session_id=sid))

    @app.tool("destructive", owns=Owns("embed session", "sessionId", action="revoke"))
    def revoke_iframe_session(sessionId: str) -> bool:
        """Log an embed session out (kept for audit); returns false when it never existed."""
        sid = store.check_session_id(sessionId)
        return db.write(lambda c: store.revoke_session(c, session_id=sid))

    @app.tool("read")
    def get_iframe_session(sessionId: str) -> dict[str, Any] | None:
        """Fetch a live embed session; null when missing, expired or revoked."""
        sid = store.check_session_id(sessionId)
        return db.read(lambda c: store.get_session(c, session_id=sid))
