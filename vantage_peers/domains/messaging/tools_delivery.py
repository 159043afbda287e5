"""MCP tools for acknowledgements and delivery status, and the redelivery job (docs/delivery.md).

Who may act is declared on each tool (the recipient acknowledges, the sender reads the delivery);
the rules themselves live in `delivery.py`.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ...core.errors import InvalidArgument, NotFound
from ...core.ids import now_ms
from ...core.validators import require_text
from ...pipeline.app import App
from ...pipeline.policy import Owns
from ...pipeline.scheduler import tick_now
from . import delivery, tools_resources

JOB = "message-redelivery"
MAX_NOTE_BYTES = 10_000
MAX_ACK_TIMEOUT_SECONDS = 7 * 24 * 3600


def ack_timeout_ms(app: App, required: bool, seconds: int | None) -> int | None:
    """The first wait for an acknowledgement in ms, or None when the send asks for none."""
    if not required:
        if seconds is not None:
            raise InvalidArgument("ackTimeoutSeconds needs ackRequired: true")
        return None
    value = app.settings.ack_timeout_seconds if seconds is None else seconds
    if not 1 <= value <= MAX_ACK_TIMEOUT_SECONDS:
        raise InvalidArgument(f"ackTimeoutSeconds must be 1..{MAX_ACK_TIMEOUT_SECONDS} (7 days)")
    return value * 1000


def require_ack(app: App, conn: Any, sent: dict[str, Any], timeout_ms: int, *, broadcast: bool) -> None:
    """Called by send_message inside its transaction; warns about stale recipients a broadcast skips."""
    skipped = delivery.require_ack(conn, message_id=sent["messageId"], timeout_ms=timeout_ms, now=now_ms(),
                                   dead_after_ms=app.settings.dead_after_seconds * 1000, broadcast=broadcast)
    if skipped:
        shown = ", ".join(skipped[:10]) + (" …" if len(skipped) > 10 else "")
        app.warn(f"{len(skipped)} stale recipient(s) (no presence for VP_DEAD_AFTER_SECONDS) are not waited on "
                 f"by this broadcast: {shown}")


def register(app: App) -> None:
    db = app.db
    settings = app.settings

    def redeliver() -> dict[str, int]:
        now = tick_now()
        if not db.read(lambda c: delivery.any_due(c, now=now)):
            return {"redelivered": 0, "deadLettered": 0}
        return db.write(lambda c: delivery.redeliver_due(c, now=now, max_attempts=settings.max_delivery_attempts))

    app.add_job(JOB, redeliver)
    app.allow_concurrent(JOB)  # every effect is a compare-and-set UPDATE: no lease needed
    tools_resources.register(app)  # vp://inbox/{orchestrator}, vp://tasks/{orchestrator} + subscriptions

    # Both in `core` (issue #30): every agent is told to acknowledge. To keep core within Cursor's 40-tool
    # cap (and core,missions within Windsurf's 50), list_broadcast_status and search_messages_by_keyword
    # moved to `extras` (messaging/tools.py).
    @app.tool("idempotent", identity="recipient",
              owns=Owns("receipt", "receiptIds", action="acknowledge"), quick=True)
    def acknowledge_message(
        receiptIds: Annotated[list[str] | None, Field(max_length=delivery.MAX_ACK_IDS)] = None,
        messageId: str | None = None,
        note: str | None = None,
        recipient: str | None = None,
    ) -> dict[str, Any]:
        """Acknowledge messages you received by `receiptIds` or `messageId`; returns counts.

        An unacknowledged `ackRequired` one is redelivered, then dead-lettered.
        """
        who = recipient
        text = require_text(note, "note", max_bytes=MAX_NOTE_BYTES) if note is not None else None
        return db.write(lambda c: delivery.acknowledge(c, caller=who, receipt_ids=receiptIds, message_id=messageId,
                                                       note=text, now=now_ms()))

    @app.tool("read", identity="callerOrchestrator",
              owns=Owns("message", "messageId", action="see the delivery of"), quick=True)
    def get_message_delivery(messageId: str, callerOrchestrator: str | None = None) -> dict[str, Any]:
        """Show who received, read and acknowledged a message you sent (sender or `system`); returns per-recipient states."""
        view = db.read(lambda c: delivery.delivery(c, message_id=messageId, now=now_ms(),
                                                   dead_after_ms=settings.dead_after_seconds * 1000))
        if view is None:
            raise NotFound(f"message {messageId} does not exist")
        return view
