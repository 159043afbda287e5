"""MCP tools for messaging."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ...core.compact import Compact, Detail, dense_text_for, shape
from ...core.envelope import cut
from ...core.errors import InvalidArgument, NotFound
from ...core.validators import MAX_CONTENT_BYTES, check_name, json_object, require_query, require_text
from ...db.paging import Fields, clamp_limit
from ...pipeline.app import App
from ...pipeline.policy import Owns, declared_loader
from ..profiles import store as profiles_store
from . import store, tools_delivery

MESSAGE_DATA_MAX_BYTES = 16_384
# Compact answers (core/compact.py); check_messages delivers, so it always shows messages whole.
# createdAt: a message's time matters to the reader (and the messages-feed card needs it)
MESSAGE = Compact(keys=("_id", "from", "channel", "createdAt"), text=("content",))


def register(app: App) -> None:
    db = app.db
    app.add_record("message", declared_loader("message"))
    app.add_record("receipt", declared_loader("receipt"))
    tools_delivery.register(app)  # acknowledgements, delivery status, redelivery job, inbox resources
    # check_messages too: its messages stay whole (it delivers), only the indentation goes.
    dense_text_for(app, ("list_messages", "search_messages_by_keyword", "check_messages"))

    @app.tool("write", identity="from", instance="fromInstanceId", idempotent=True, quick=True)
    def send_message(
        channel: str,
        content: str,
        from_: Annotated[str | None, Field(alias="from")] = None,
        fromInstanceId: str | None = None,
        instanceId: str | None = None,
        sessionDay: int | None = None,
        tenantId: str | None = None,
        ackRequired: bool = False,
        ackTimeoutSeconds: int | None = None,
        data: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Send a message to a role, a comma list, an instance id, or `broadcast`; returns `{messageId, recipients}`.

        `data`: JSON returned as-is.
        """
        sender = from_
        payload = json_object(data, "data", max_bytes=MESSAGE_DATA_MAX_BYTES)
        check_name(channel, "channel")
        text = require_text(content, "content", max_bytes=MAX_CONTENT_BYTES)
        target = check_name(instanceId, "instanceId") if instanceId else None
        if target and ("," in channel or channel == store.BROADCAST):
            raise InvalidArgument("instanceId targets one role's instance; it cannot be used with a list or broadcast")
        from_inst = fromInstanceId
        ack_ms = tools_delivery.ack_timeout_ms(app, ackRequired, ackTimeoutSeconds)  # None: no ack awaited

        def send(c):
            sent = store.send_message(
                c, sender=sender, channel=channel.strip(), content=text, from_instance_id=from_inst,
                instance_id=target, session_day=sessionDay, tenant_id=tenantId, data=payload,
            )
            # Still delivered (an agent that registers later finds its backlog), but likely a typo.
            recipients = store.resolve_recipients(c, sender=sender, channel=channel.strip(), instance_id=target)
            for recipient in dict.fromkeys(r for r, _ in recipients):
                warning = profiles_store.unknown_name_warning(c, recipient)
                if warning:
                    app.warn(warning)
            if ack_ms is not None:
                tools_delivery.require_ack(app, c, sent, ack_ms, broadcast=channel.strip() == store.BROADCAST)
            return sent

        return db.write(send)

    @app.tool("read", identity="recipient", instance="recipientInstanceId", quick=True)
    def check_messages(
        recipient: str | None = None,
        recipientInstanceId: str | None = None,
        tenantId: str | None = None,
        since: int | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Fetch your unread messages, oldest first, without marking them read (mark_as_read takes their `receiptId`s).

        For more than one answer holds, mark them read or pass `since`.
        """
        who = recipient
        inst = recipientInstanceId
        size = clamp_limit(limit, store.CHECK_DEFAULT_LIMIT, store.CHECK_MAX_LIMIT)
        return cut(db.read(
            lambda c: store.check_messages(
                c, recipient=who, recipient_instance_id=inst, tenant_id=tenantId, since=since, limit=size
            )
        ))["items"]

    @app.tool("idempotent", owns=Owns("receipt", "receiptIds", action="mark read"), quick=True)
    def mark_as_read(receiptIds: Annotated[list[str], Field(max_length=10_000)]) -> int:
        """Mark messages read by receipt id; returns how many changed."""
        return db.write(lambda c: store.mark_as_read(c, receipt_ids=receiptIds))

    @app.tool("destructive", identity="callerOrchestrator", owns=Owns("message", "messageId", action="delete"))
    def delete_message(messageId: str, callerOrchestrator: str | None = None) -> dict[str, Any]:
        """Delete a message and its receipts (sender or `system`); returns counts."""
        def run(c):
            if store.message_sender(c, messageId) is None:
                return {"deleted": False, "receiptsDeleted": 0}
            return store.delete_message(c, message_id=messageId)

        return db.write(run)

    @app.tool("read", quick=True)
    def get_message(messageId: str) -> dict[str, Any] | None:
        """Fetch a message by id, content whole."""
        readers = app.readers()
        return db.read(lambda c: store.get_message(c, message_id=messageId)
                       if store.can_read(c, messageId, readers) else None)

    @app.tool("read")
    def list_messages(
        from_: Annotated[str | None, Field(alias="from")] = None,
        channel: str | None = None,
        sessionDay: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        fields: Fields = "full",
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """List messages newest first, by `from`, `channel` or `sessionDay`."""
        return shape(db.read(
            lambda c: store.list_messages(
                c, sender=from_, channel=channel, session_day=sessionDay, limit=limit, cursor=cursor, fields=fields,
                readers=app.readers(),
            )
        ), detail, MESSAGE, fields=fields)

    @app.tool("read", toolset="extras")  # rarely used: get_message_delivery (core) shows more (#30)
    def list_broadcast_status(messageId: str) -> dict[str, Any]:
        """List who has read a message and who has not."""
        readers = app.readers()
        status = db.read(lambda c: store.broadcast_status(c, message_id=messageId)
                         if store.can_read(c, messageId, readers) else None)
        if status is None:
            raise NotFound(f"message {messageId} does not exist")
        return status

    @app.tool("read", toolset="extras")  # rarely used; out of core to keep it within Cursor's 40 (#30)
    def search_messages_by_keyword(
        query: str,
        limit: int | None = None,
        from_: Annotated[str | None, Field(alias="from")] = None,
        channel: str | None = None,
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """Search message content by keyword (all words), best first, with a `snippet`."""
        size = clamp_limit(limit)
        query = require_query(query)
        readers = app.readers()
        return shape(cut(db.read(lambda c: store.search_messages(c, query=query, limit=size, sender=from_,
                                                                    channel=channel, readers=readers))),
                     detail, MESSAGE)
