"""Messages and receipts. One message row per send, one receipt per recipient, in one transaction."""

from __future__ import annotations

from typing import Any

from ...core.envelope import ENVELOPE_TARGET_BYTES
from ...core.ids import new_id, now_ms
from ...db import Connection, Row, dumps, loads
from ...db.paging import equals, keyset_page, to_doc
from ...search.fts import fts_query
from ...search.keyword import keyword_docs
from .. import ports
from ..profiles import store as profiles

BROADCAST = "broadcast"
MESSAGE_LITE = ("_id", "_creationTime", "from", "channel", "createdAt")
CHECK_DEFAULT_LIMIT = 100
CHECK_MAX_LIMIT = 500


def visible(readers: tuple[str, ...] | None, table: str = "messages") -> tuple[list[str], list[Any]]:
    """Read visibility of messages: a token reads the messages its identities sent or received (a
    receipt names them: direct, channel list, broadcast). None = every message."""
    if readers is None:
        return [], []
    marks = ",".join("?" * len(readers)) or "NULL"
    return ([f"({table}.sender IN ({marks}) OR EXISTS (SELECT 1 FROM messageReceipts vr WHERE "
             f"vr.messageId = {table}.id AND vr.recipient IN ({marks})))"], [*readers, *readers])


def can_read(conn: Connection, message_id: str, readers: tuple[str, ...] | None) -> bool:
    where, params = visible(readers)
    if not where:
        return True
    return conn.scalar(f"SELECT 1 FROM messages WHERE id = ? AND {where[0]}", [message_id, *params]) is not None


def message_doc(row: Row) -> dict[str, Any]:
    return to_doc(row, rename={"sender": "from"}, json_cols=("data",))


def resolve_recipients(
    conn: Connection, *, sender: str, channel: str, instance_id: str | None
) -> list[tuple[str, str | None]]:
    """(recipient, recipientInstanceId) pairs for a channel, resolved now.

    - `broadcast`: every orchestrator with a profile, except the sender.
    - `a,b,c`: each listed orchestrator (duplicates collapse).
    - a role with `instanceId`: only that instance of the role.
    - a name that is a known instance id of exactly one orchestrator (e.g. `sigma-vps-01`):
      that instance. Otherwise the name is a role (role names such as `dev-frontend` hold `-` too).
    """
    if channel == BROADCAST:
        return [(o, None) for o in profiles.all_orchestrators(conn) if o != sender]
    names = [n.strip() for n in channel.split(",") if n.strip()]
    seen: dict[tuple[str, str | None], None] = {}
    for name in names:
        if instance_id and len(names) == 1:
            seen[(name, instance_id)] = None
            continue
        if "-" in name and conn.scalar("SELECT 1 FROM profiles WHERE orchestratorId = ?", (name,)) is None:
            owner = profiles.orchestrator_of_instance(conn, name)
            if owner is not None:
                seen[(owner, name)] = None
                continue
        seen[(name, None)] = None
    return list(seen)


def send_message(
    conn: Connection,
    *,
    sender: str,
    channel: str,
    content: str,
    from_instance_id: str | None = None,
    instance_id: str | None = None,
    session_day: int | None = None,
    tenant_id: str | None = None,
    data: dict[str, Any] | None = None,
) -> dict[str, Any]:
    now = now_ms()
    message_id = new_id("msg")
    extra = ", data" if data is not None else ""  # named only when given: older files lack the column
    conn.execute(
        "INSERT INTO messages (id, sender, fromInstanceId, channel, instanceId, content, sessionDay, tenantId, "
        f"createdAt{extra}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?{', ?' if extra else ''})",
        (message_id, sender, from_instance_id, channel, instance_id, content, session_day, tenant_id, now,
         *((dumps(data),) if extra else ())),
    )
    recipients = resolve_recipients(conn, sender=sender, channel=channel, instance_id=instance_id)
    conn.executemany(
        "INSERT INTO messageReceipts (id, messageId, recipient, recipientInstanceId, tenantId, createdAt) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        [(new_id("rcp"), message_id, r, ri, tenant_id, now) for r, ri in recipients],
    )
    return {"messageId": message_id, "recipients": len(recipients)}


# check_messages' optional keys, in the order its statement selects them (an item leaves out a NULL).
_OPTIONAL = ("fromInstanceId", "channel", "content", "createdAt", "sessionDay", "tenantId", "recipientInstanceId")
_CONTENT = _OPTIONAL.index("content")


def check_messages(
    conn: Connection,
    *,
    recipient: str,
    recipient_instance_id: str | None = None,
    tenant_id: str | None = None,
    since: int | None = None,
    limit: int = CHECK_DEFAULT_LIMIT,
) -> list[dict[str, Any]]:
    """Unread receipts of `recipient`, oldest first (does not mark them read)."""
    clauses = ["r.recipient = ?", "r.readAt IS NULL"]
    args: list[Any] = [recipient]
    if recipient_instance_id is not None:
        clauses.append("(r.recipientInstanceId IS NULL OR r.recipientInstanceId = ?)")
        args.append(recipient_instance_id)
    if tenant_id is not None:
        clauses.append("r.tenantId = ?")
        args.append(tenant_id)
    if since is not None:
        clauses.append("r.createdAt > ?")
        args.append(since)
    rows = conn.iterate_rows(
        "SELECT r.id, m.id, m.sender, m.fromInstanceId, m.channel, m.content, m.createdAt, m.sessionDay, "
        "m.tenantId, r.recipientInstanceId, m.data, r.ackRequired, r.deliveryAttempt "
        "FROM messageReceipts r INDEXED BY receipts_unread JOIN messages m ON m.id = r.messageId "
        f"WHERE {' AND '.join(clauses)} ORDER BY r.createdAt, r.id LIMIT ?",
        [*args, limit],
    )
    out: list[dict[str, Any]] = []
    budget = ENVELOPE_TARGET_BYTES  # the reply is cut to this anyway: never load 500 x 1 MB to find out
    for receipt, message, sender, *optional, data, ack, attempt in rows:  # tuples, not dicts: 20 rows 84 → 70 µs
        if out and budget <= 0:
            break
        budget -= len(optional[_CONTENT] or "") + len(data or "")  # envelope.cut makes the exact cut
        item: dict[str, Any] = {"receiptId": receipt, "messageId": message, "from": sender,
                                **{key: value for key, value in zip(_OPTIONAL, optional, strict=True) if value is not None}}
        if data is not None:
            item["data"] = loads(data)
        item["readAt"] = None
        if ack:  # delivery.py: acknowledge_message it, or it comes back (deliveryAttempt + 1)
            item["ackRequired"] = True
            item["deliveryAttempt"] = attempt
        out.append(item)
    return out


def mark_as_read(conn: Connection, *, receipt_ids: list[str]) -> int:
    if not receipt_ids:
        return 0
    now = now_ms()
    changed = 0
    unique = list(dict.fromkeys(receipt_ids))
    for start in range(0, len(unique), 500):
        chunk = unique[start : start + 500]
        marks = ",".join("?" for _ in chunk)
        changed += conn.execute(
            f"UPDATE messageReceipts SET readAt = ? WHERE readAt IS NULL AND id IN ({marks})", [now, *chunk]
        )
    return changed


def get_message(conn: Connection, *, message_id: str) -> dict[str, Any] | None:
    row = conn.one("SELECT * FROM messages WHERE id = ?", (message_id,))
    return message_doc(row) if row else None


def delete_message(conn: Connection, *, message_id: str) -> dict[str, Any]:
    receipts = conn.scalar("SELECT count(*) FROM messageReceipts WHERE messageId = ?", (message_id,))
    deleted = conn.execute("DELETE FROM messages WHERE id = ?", (message_id,))
    return {"deleted": bool(deleted), "receiptsDeleted": receipts if deleted else 0}


def message_sender(conn: Connection, message_id: str) -> str | None:
    return conn.scalar("SELECT sender FROM messages WHERE id = ?", (message_id,))


def list_messages(
    conn: Connection,
    *,
    sender: str | None,
    channel: str | None,
    session_day: int | None,
    limit: int | None,
    cursor: str | None,
    fields: str | None,
    readers: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    where, params = equals((("sender", sender), ("channel", channel), ("sessionDay", session_day)))
    seen, seen_params = visible(readers)
    where, params = where + seen, params + seen_params
    return keyset_page(
        conn, table="messages", to_item=message_doc, where=where, params=params,
        limit=limit, cursor=cursor, fields=fields, lite_keys=MESSAGE_LITE,
    )


def broadcast_status(conn: Connection, *, message_id: str) -> dict[str, Any] | None:
    msg = conn.one("SELECT id, sender, channel, createdAt FROM messages WHERE id = ?", (message_id,))
    if msg is None:
        return None
    receipts = []
    for r in conn.query(
        "SELECT recipient, recipientInstanceId, readAt FROM messageReceipts WHERE messageId = ? "
        "ORDER BY recipient, recipientInstanceId",
        (message_id,),
    ):
        item: dict[str, Any] = {"recipient": r["recipient"], "read": r["readAt"] is not None}
        if r["recipientInstanceId"] is not None:
            item["recipientInstanceId"] = r["recipientInstanceId"]
        if r["readAt"] is not None:
            item["readAt"] = r["readAt"]
        receipts.append(item)
    return {
        "messageId": msg["id"], "from": msg["sender"], "channel": msg["channel"],
        "createdAt": msg["createdAt"], "receipts": receipts,
        "readCount": sum(1 for r in receipts if r["read"]), "unreadCount": sum(1 for r in receipts if not r["read"]),
    }


def search_messages(
    conn: Connection, *, query: str, limit: int, sender: str | None = None, channel: str | None = None,
    readers: tuple[str, ...] | None = None,
) -> list[dict[str, Any]]:
    match = fts_query(query)
    if match is None:
        return []
    where, params = equals([("d.sender", sender), ("d.channel", channel)])
    seen, seen_params = visible(readers, "d")
    where, params = where + seen, params + seen_params
    return keyword_docs(conn, fts="messages_fts", table="messages", match=match, where=where, params=params,
                        limit=limit, snippet="content", shape=message_doc)


ports.notify.offer(send_message)  # the domains below messaging (leases) send their notices through it
