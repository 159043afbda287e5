"""Acknowledgements, redelivery and dead letters on message receipts (docs/delivery.md).

A receipt moves delivered (the row exists) -> read (`readAt`) -> acknowledged (`ackedAt`).
An `ackRequired` receipt carries `nextDeliveryAt`; when it passes without an acknowledgement the
scheduler redelivers it (clears `readAt`, so it is back in check_messages, and bumps
`deliveryAttempt`), with the wait doubling each time, up to the maximum; then it is dead-lettered
and the sender gets a `system` message. Both steps are single compare-and-set UPDATEs on
`nextDeliveryAt`, so N processes running the job at once act on each receipt exactly once.
"""

from __future__ import annotations

from typing import Any

from ...core import parties
from ...core.errors import Forbidden, InvalidArgument, NotFound
from ...core.ids import new_id
from ...core.rbac import SYSTEM
from ...db import Connection, dumps
from . import store

MAX_BACKOFF_MS = 24 * 3600 * 1000  # one wait never grows past a day
MAX_ACK_IDS = 500
DEAD_LETTER_BATCH = 200


def last_seen(conn: Connection, recipient: str, instance_id: str | None = None) -> int | None:
    """The recipient's latest presence (of that instance, when the receipt targets one)."""
    if instance_id:
        return conn.scalar("SELECT max(lastSeen) FROM instances WHERE orchestratorId = ? AND instanceId = ?",
                           (recipient, instance_id))
    return conn.scalar("SELECT max(lastSeen) FROM instances WHERE orchestratorId = ?", (recipient,))


def is_stale(seen: int | None, *, now: int, dead_after_ms: int) -> bool:
    """No presence at all, or none for `dead_after_ms`."""
    return seen is None or seen < now - dead_after_ms


def require_ack(conn: Connection, *, message_id: str, timeout_ms: int, now: int, dead_after_ms: int,
                broadcast: bool) -> list[str]:
    """Make every receipt of a just-sent message wait for an acknowledgement.

    A broadcast never waits on a stale recipient: its receipt still asks for an acknowledgement
    (the agent finds it when it comes back) but is neither redelivered nor dead-lettered, and
    does not count as pending. Returns the stale recipients skipped that way.
    """
    conn.execute(
        "UPDATE messageReceipts SET ackRequired = 1, ackTimeoutMs = ?, nextDeliveryAt = ? WHERE messageId = ?",
        (timeout_ms, now + timeout_ms, message_id),
    )
    if not broadcast:
        return []
    stale = [r for r in conn.query(
        "SELECT r.id, r.recipient FROM messageReceipts r WHERE r.messageId = ? AND coalesce("
        "(SELECT max(i.lastSeen) FROM instances i WHERE i.orchestratorId = r.recipient), 0) < ?",
        (message_id, now - dead_after_ms))]
    conn.executemany("UPDATE messageReceipts SET staleAtSend = 1, nextDeliveryAt = NULL WHERE id = ?",
                     [(r["id"],) for r in stale])
    return [r["recipient"] for r in stale]


def acknowledge(conn: Connection, *, caller: str, receipt_ids: list[str] | None, message_id: str | None,
                note: str | None, now: int) -> dict[str, Any]:
    """Acknowledge receipts of `caller` (or any, for `system`); acknowledging twice changes nothing."""
    if (receipt_ids is None) == (message_id is None):
        raise InvalidArgument("pass exactly one of receiptIds or messageId")
    if receipt_ids is not None:
        ids = list(dict.fromkeys(receipt_ids))
        if not ids or len(ids) > MAX_ACK_IDS:
            raise InvalidArgument(f"receiptIds must hold 1 to {MAX_ACK_IDS} ids")
        marks = ",".join("?" * len(ids))
        rows = conn.query(f"SELECT id, recipient, ackedAt FROM messageReceipts WHERE id IN ({marks})", ids)
        missing = sorted(set(ids) - {r["id"] for r in rows})
        if missing:
            raise NotFound(f"no receipt {', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}; "
                           "receipt ids come from check_messages")
        foreign = [r["id"] for r in rows if caller != SYSTEM and caller not in parties.names("receipt", r, "change")]
        if foreign:
            raise Forbidden(f"receipt {foreign[0]} is addressed to another agent: only its recipient "
                            "(or system) may acknowledge it")
    else:
        if conn.scalar("SELECT 1 FROM messages WHERE id = ?", (message_id,)) is None:
            raise NotFound(f"message {message_id} does not exist")
        mine = "" if caller == SYSTEM else " AND recipient = ?"
        rows = conn.query(f"SELECT id, recipient, ackedAt FROM messageReceipts WHERE messageId = ?{mine}",
                          (message_id,) if caller == SYSTEM else (message_id, caller))
        if not rows:
            raise Forbidden(f"message {message_id} has no receipt addressed to {caller}: only a recipient "
                            "(or system) may acknowledge it")
    todo = [r["id"] for r in rows if r["ackedAt"] is None]
    for start in range(0, len(todo), 500):
        chunk = todo[start:start + 500]
        conn.execute(
            "UPDATE messageReceipts SET ackedAt = ?, ackNote = ?, ackedBy = ?, nextDeliveryAt = NULL, "
            f"readAt = coalesce(readAt, ?) WHERE ackedAt IS NULL AND id IN ({','.join('?' * len(chunk))})",
            [now, note, caller, now, *chunk],
        )
    return {"acknowledged": len(todo), "alreadyAcknowledged": len(rows) - len(todo),
            "receiptIds": [r["id"] for r in rows]}


def delivery(conn: Connection, *, message_id: str, now: int, dead_after_ms: int) -> dict[str, Any] | None:
    """Per recipient (and instance): delivered / read / acknowledged / redelivered / dead-lettered / stale."""
    msg = conn.one("SELECT id, sender, fromInstanceId, channel, createdAt FROM messages WHERE id = ?",
                   (message_id,))
    if msg is None:
        return None
    seen: dict[tuple[str, str | None], int | None] = {}
    out = []
    for r in conn.query(
        "SELECT * FROM messageReceipts WHERE messageId = ? ORDER BY recipient, coalesce(recipientInstanceId, '')",
        (message_id,),
    ):
        key = (r["recipient"], r["recipientInstanceId"])
        if key not in seen:
            seen[key] = last_seen(conn, *key)
        stale = is_stale(seen[key], now=now, dead_after_ms=dead_after_ms)
        item: dict[str, Any] = {
            "receiptId": r["id"], "recipient": r["recipient"], "delivered": True, "deliveredAt": r["createdAt"],
            "read": r["readAt"] is not None, "acknowledged": r["ackedAt"] is not None,
            "ackRequired": bool(r["ackRequired"]), "deliveryAttempt": r["deliveryAttempt"],
            "redelivered": r["deliveryAttempt"] - 1, "deadLettered": r["deadLetteredAt"] is not None,
            "recipientLastSeen": seen[key], "stale": stale,
        }
        for src, dst in (("recipientInstanceId", "recipientInstanceId"), ("readAt", "readAt"),
                         ("ackedAt", "acknowledgedAt"), ("ackNote", "ackNote"), ("ackedBy", "acknowledgedBy"),
                         ("redeliveredAt", "redeliveredAt"), ("nextDeliveryAt", "nextDeliveryAt"),
                         ("deadLetteredAt", "deadLetteredAt")):
            if r[src] is not None:
                item[dst] = r[src]
        if r["staleAtSend"]:
            item["skippedAsStale"] = True  # a broadcast did not wait on this recipient
        item["pending"] = (item["ackRequired"] and not item["acknowledged"] and not item["deadLettered"]
                           and not r["staleAtSend"] and not (stale and msg["channel"] == store.BROADCAST))
        out.append(item)
    return {
        "messageId": msg["id"], "from": msg["sender"], "channel": msg["channel"], "createdAt": msg["createdAt"],
        "recipients": out,
        "counts": {
            "recipients": len(out), "read": sum(i["read"] for i in out),
            "acknowledged": sum(i["acknowledged"] for i in out), "pending": sum(i["pending"] for i in out),
            "deadLettered": sum(i["deadLettered"] for i in out), "stale": sum(i["stale"] for i in out),
        },
    }


def any_due(conn: Connection, *, now: int) -> bool:
    """A read first, so that N idle processes do not take the write lock every tick for nothing."""
    return conn.scalar("SELECT 1 FROM messageReceipts INDEXED BY receipts_ack_due WHERE nextDeliveryAt <= ? "
                       "LIMIT 1", (now,)) is not None


def redeliver_due(conn: Connection, *, now: int, max_attempts: int) -> dict[str, int]:
    """Redeliver receipts whose wait for an acknowledgement ran out; dead-letter those out of attempts.

    Call inside one write transaction. Each UPDATE matches a receipt only while its `nextDeliveryAt`
    is due, and moves it (or clears it): a second process running this at the same time finds
    nothing left to do, so every redelivery and every dead-letter notice happens once.
    """
    dead = conn.query(
        "UPDATE messageReceipts SET deadLetteredAt = ?1, nextDeliveryAt = NULL "
        "WHERE id IN (SELECT id FROM messageReceipts INDEXED BY receipts_ack_due WHERE nextDeliveryAt <= ?1 "
        "AND ackedAt IS NULL AND deliveryAttempt >= ?2 LIMIT ?3) "
        "RETURNING id, messageId, recipient, recipientInstanceId, deliveryAttempt",
        (now, max_attempts, DEAD_LETTER_BATCH),
    )
    for row in dead:
        _notify_sender(conn, row, now=now)
    redelivered = conn.execute(
        "UPDATE messageReceipts SET deliveryAttempt = deliveryAttempt + 1, readAt = NULL, redeliveredAt = ?1, "
        "nextDeliveryAt = ?1 + min(?3, coalesce(ackTimeoutMs, 0) * (CAST(1 AS BIGINT) << CAST(min(deliveryAttempt, 20) AS INT))) "
        "WHERE id IN (SELECT id FROM messageReceipts INDEXED BY receipts_ack_due WHERE nextDeliveryAt <= ?1 "
        "AND ackedAt IS NULL AND deliveryAttempt < ?2)",
        (now, max_attempts, MAX_BACKOFF_MS),
    )
    return {"redelivered": redelivered, "deadLettered": len(dead)}


def _notify_sender(conn: Connection, row: dict[str, Any], *, now: int) -> None:
    """The sender learns which message to whom was never acknowledged, and when that agent was last seen."""
    msg = conn.one("SELECT sender, channel FROM messages WHERE id = ?", (row["messageId"],))
    if msg is None or msg["sender"] == SYSTEM:
        return
    who = row["recipient"] + (f" (instance {row['recipientInstanceId']})" if row["recipientInstanceId"] else "")
    seen = last_seen(conn, row["recipient"], row["recipientInstanceId"])
    presence = f"last seen at {seen} (Unix ms)" if seen is not None else "never seen (no presence)"
    text = (f"DEAD_LETTER: message {row['messageId']} on channel {msg['channel']} was not acknowledged by {who} "
            f"after {row['deliveryAttempt']} delivery attempts; {who} was {presence}. "
            f"Receipt {row['id']}. See get_message_delivery.")
    data = {"event": "dead_letter", "messageId": row["messageId"], "receiptId": row["id"], "channel": msg["channel"],
            "recipient": row["recipient"], "recipientInstanceId": row["recipientInstanceId"],
            "deliveryAttempts": row["deliveryAttempt"], "lastSeen": seen}
    conn.execute(
        "INSERT INTO messages (id, sender, channel, content, createdAt, data) VALUES (?, ?, ?, ?, ?, ?)",
        (notice_id := new_id("msg"), SYSTEM, msg["sender"], text, now, dumps(data)),
    )
    conn.execute(
        "INSERT INTO messageReceipts (id, messageId, recipient, createdAt) VALUES (?, ?, ?, ?)",
        (new_id("rcp"), notice_id, msg["sender"], now),
    )
