"""Read models of the people-side views: Team, Messages, Claims and Activity.

Each function takes one connection (the caller holds one read snapshot) and returns plain dicts a
template renders. `readers` (whose messages and tasks the person may read: policy.readers_of of
their client, None = every one) narrows every list through the stores' own `visible` rules, so the
dashboard shows what the tools return to that client's token. Lists are keyset pages (`paging.keyset_page`: `{items, nextCursor?}`), so a page
costs the same at 100k rows as at 100; per-page extras (unread counts, receipt tallies) are one
query over the page's ids, never a correlated subquery per row of the table.
"""

from __future__ import annotations

from typing import Any

from ..core.scopes import sql_filter
from ..db import Connection
from ..db.paging import decode_cursor, encode_cursor, equals, keyset_page
from ..domains.leases import store as leases_store
from ..domains.messaging import store as messaging
from ..domains.profiles import processes
from ..domains.tasks import store as tasks

Readers = tuple[str, ...] | None

PAGE = 25
ONLINE_MS = 2 * 60_000  # presence is refreshed by every tool call: seen in the last 2 min = online
IDLE_MS = 15 * 60_000  # then idle up to 15 min, stale after
OPEN = ("todo", "in_progress", "review", "blocked")
PRESENCE = ("online", "idle", "gone", "stale")
# #30 (docs/presence.md): an instance whose server processes have rows is judged by their heartbeats —
# gone when none is live, however recently it was seen; one without (over HTTP, older versions) by lastSeen.
_PROC = "FROM processes p WHERE p.orchestrator = instances.orchestratorId AND p.instance = instances.instanceId"
LIVE = f"EXISTS (SELECT 1 {_PROC} AND p.stoppedAt IS NULL AND p.liveUntil > ?)"
KNOWN = f"EXISTS (SELECT 1 {_PROC})"


def presence(last_seen: int | None, now: int, live: bool | None = None) -> str:
    """online/idle by lastSeen; `live` False (its processes are known and none heartbeats) is gone."""
    if live is False:
        return "gone"
    age = now - (last_seen or 0)
    if live:
        return "online" if age <= ONLINE_MS else "idle"
    return "online" if age <= ONLINE_MS else "idle" if age <= IDLE_MS else "stale"


def _presence_filter(state: str | None, now: int) -> tuple[list[str], list[Any]]:
    if state == "online":
        return [f"lastSeen >= ? AND ({LIVE} OR NOT {KNOWN})"], [now - ONLINE_MS, now]
    if state == "idle":
        return [f"lastSeen < ? AND ({LIVE} OR (NOT {KNOWN} AND lastSeen >= ?))"], [now - ONLINE_MS, now, now - IDLE_MS]
    if state == "gone":
        return [f"{KNOWN} AND NOT {LIVE}"], [now]
    if state == "stale":
        return [f"lastSeen < ? AND NOT {KNOWN}"], [now - IDLE_MS]
    return [], []


def _marks(values: list[Any]) -> str:
    return ",".join("?" for _ in values)


# -- Team -------------------------------------------------------------------------------------
def team(conn: Connection, *, now: int, state: str | None, who: str | None, cursor: str | None,
         limit: int = PAGE, readers: Readers = None) -> dict[str, Any]:
    """Every instance (newest seen first) with presence, summary, open tasks and unread count (the
    tasks `readers` may read; the unread count of its own identities only, None for the others)."""
    where, params = equals((("orchestratorId", who),))
    extra, args = _presence_filter(state, now)
    where, params = [*where, *extra], [*params, *args]
    page = keyset_page(conn, table="instances", to_item=dict, where=where, params=params, sort_col="lastSeen",
                       limit=limit, cursor=cursor)
    names = list({r["orchestratorId"] for r in page["items"]})
    open_tasks: dict[str, int] = {}
    unread: dict[str, int] = {}
    inboxes = names if readers is None else [n for n in names if n in readers]
    if names:
        # Both counts walk partial indexes (tasks_open_by_assignee, receipts_unread) per name.
        seen, seen_params = tasks.visible(readers)
        for r in conn.query(f"SELECT assignedTo AS who, count(*) AS n FROM tasks WHERE assignedTo IN "
                            f"({_marks(names)}) AND status IN ('todo', 'in_progress', 'review', 'blocked') "
                            + "".join(f" AND {w}" for w in seen) + " GROUP BY assignedTo", [*names, *seen_params]):
            open_tasks[r["who"]] = r["n"]
    if inboxes:
        for r in conn.query(f"SELECT recipient AS who, count(*) AS n FROM messageReceipts INDEXED BY receipts_unread "
                            f"WHERE recipient IN ({_marks(inboxes)}) AND readAt IS NULL GROUP BY recipient", inboxes):
            unread[r["who"]] = r["n"]
    procs = processes.by_identity(conn, now=now, orchestrators=names)
    for item in page["items"]:
        known = procs.get((item["orchestratorId"], item["instanceId"] or ""))
        item["live"] = None if known is None else known["processes"] > 0
        item["processes"] = 0 if known is None else known["processes"]
        item["presence"] = presence(item["lastSeen"], now, item["live"])
        item["openTasks"] = open_tasks.get(item["orchestratorId"], 0)
        item["unread"] = unread.get(item["orchestratorId"], 0) if item["orchestratorId"] in inboxes else None
    page["counts"] = {
        "orchestrators": conn.scalar("SELECT count(*) FROM profiles"),
        "online": conn.scalar(f"SELECT count(*) FROM instances WHERE lastSeen >= ? AND ({LIVE} OR NOT {KNOWN})",
                              (now - ONLINE_MS, now)),
    }
    return page


# -- Messages ---------------------------------------------------------------------------------
# Receipt tallies shown per message (docs/delivery.md): read, and for ackRequired messages the
# receipts still awaiting an acknowledgement and those dead-lettered. The template renders this list.
RECEIPT_COLUMNS = ("recipients", "read", "unread", "unacknowledged", "deadLettered")
AWAITING_ACK = "r.ackRequired = 1 AND r.ackedAt IS NULL AND r.deadLetteredAt IS NULL"


def receipt_tallies(conn: Connection, message_ids: list[str]) -> dict[str, dict[str, int]]:
    if not message_ids:
        return {}
    out = {m: {c: 0 for c in RECEIPT_COLUMNS} for m in message_ids}
    for r in conn.query(
        "SELECT messageId, count(*) AS recipients, count(readAt) AS read, "
        f"sum(CASE WHEN {AWAITING_ACK} THEN 1 ELSE 0 END) AS unacknowledged, count(deadLetteredAt) AS deadLettered "
        f"FROM messageReceipts r WHERE messageId IN ({_marks(message_ids)}) GROUP BY messageId", message_ids,
    ):
        out[r["messageId"]] = {"recipients": r["recipients"], "read": r["read"], "unread": r["recipients"] - r["read"],
                               "unacknowledged": r["unacknowledged"], "deadLettered": r["deadLettered"]}
    return out


def channels(conn: Connection, *, limit: int = 40, readers: Readers = None) -> list[dict[str, Any]]:
    """The most recently active channels (one index probe per distinct channel via a skip-scan); of
    the messages `readers` may read when it is set."""
    if readers is not None:
        seen, params = messaging.visible(readers)
        return conn.query(f"SELECT channel, max(createdAt) AS lastAt FROM messages WHERE {seen[0]} "
                          "GROUP BY channel ORDER BY lastAt DESC LIMIT ?", [*params, limit])
    return conn.query(
        "SELECT channel, max(createdAt) AS lastAt FROM messages INDEXED BY messages_by_channel "
        "GROUP BY channel ORDER BY lastAt DESC LIMIT ?", (limit,))


def messages(conn: Connection, *, channel: str | None, sender: str | None, recipient: str | None,
             unread_only: bool, cursor: str | None, limit: int = PAGE, unacked_only: bool = False,
             dead_only: bool = False, readers: Readers = None) -> dict[str, Any]:
    """Newest first. `recipient` + `unread_only` = what that agent has not read yet; `unacked_only`:
    receipts still awaiting an acknowledgement; `dead_only`: dead-lettered ones."""
    where, params = equals((("channel", channel), ("sender", sender)))
    if recipient is not None or unread_only or unacked_only or dead_only:
        sub = ["r.messageId = messages.id"]
        if recipient is not None:
            sub.append("r.recipient = ?")
            params.append(recipient)
        if unread_only:
            sub.append("r.readAt IS NULL")
        if unacked_only:
            sub.append(AWAITING_ACK)
        if dead_only:
            sub.append("r.deadLetteredAt IS NOT NULL")
        where.append(f"EXISTS (SELECT 1 FROM messageReceipts r WHERE {' AND '.join(sub)})")
    seen, seen_params = messaging.visible(readers)
    where, params = [*where, *seen], [*params, *seen_params]
    page = keyset_page(conn, table="messages", to_item=messaging.message_doc, where=where, params=params,
                       limit=limit, cursor=cursor)
    tallies = receipt_tallies(conn, [m["_id"] for m in page["items"]])
    for item in page["items"]:
        item["receipts"] = tallies.get(item["_id"], {c: 0 for c in RECEIPT_COLUMNS})
    return page


def message_detail(conn: Connection, message_id: str, readers: Readers = None) -> dict[str, Any] | None:
    """A message and its receipts; None when there is none `readers` may read (the page says 404)."""
    if not messaging.can_read(conn, message_id, readers):
        return None
    msg = messaging.get_message(conn, message_id=message_id)
    if msg is None:
        return None
    msg["receipts"] = conn.query(
        "SELECT recipient, recipientInstanceId, readAt, ackRequired, ackedAt, ackNote, deliveryAttempt, "
        "deadLetteredAt, createdAt FROM messageReceipts WHERE messageId = ? "
        "ORDER BY recipient, recipientInstanceId LIMIT 500", (message_id,))
    return msg


# -- Claims -----------------------------------------------------------------------------------
def task_claims(conn: Connection, *, holder: str | None, cursor: str | None, now: int,
                limit: int = PAGE, readers: Readers = None) -> dict[str, Any]:
    """Tasks held today: in_progress with their claimant (assignee/instance) and open work segment.

    When the lease model (branch i22) lands, its `task:` and `path:` leases are listed by
    `lease_rows` below and shown in the same table (holder, key, expiresAt, fencing token).
    """
    where, params = ["status = 'in_progress'"], []
    if holder:
        where.append("assignedTo = ?")
        params.append(holder)
    seen, seen_params = tasks.visible(readers)
    where, params = [*where, *seen], [*params, *seen_params]
    page = keyset_page(conn, table="tasks", to_item=dict, where=where, params=params, sort_col="updatedAt",
                       limit=limit, cursor=cursor)
    ids = [t["id"] for t in page["items"]]
    open_since: dict[str, int] = {}
    if ids:
        for r in conn.query(f"SELECT taskId, startedAt FROM taskSegments WHERE endedAt IS NULL AND taskId IN "
                            f"({_marks(ids)})", ids):
            open_since[r["taskId"]] = r["startedAt"]
    expiry: dict[str, int] = {}
    if ids:  # the claim lease of each task, when it was checked out (docs/leases.md)
        for r in conn.query(f"SELECT key, expiresAt FROM agentLeases WHERE kind = 'task' AND releasedAt IS NULL "
                            f"AND expiresAt > ? AND key IN ({_marks(ids)})", [now, *ids]):
            expiry[r["key"]] = r["expiresAt"]
    page["items"] = [{"kind": "task", "key": t["id"], "title": t["title"], "holder": t["assignedTo"],
                      "instance": t["assignedToInstance"], "since": open_since.get(t["id"], t["startedAt"]),
                      "expiresAt": expiry.get(t["id"])} for t in page["items"]]
    return page


def lease_rows(conn: Connection, *, now: int, readers: Readers = None) -> list[dict[str, Any]]:
    """Leases held now: agents' task claims (of the tasks `readers` may read), path reservations and
    slots (docs/leases.md), soonest expiry first, then the scheduler's job leases (which process runs
    a background job)."""
    held = leases_store.overview(conn, now=now)
    claimed = [lease["key"] for lease in held if lease["kind"] == "task"]
    shown = set(claimed)
    if readers is not None and claimed:
        seen, seen_params = tasks.visible(readers)
        shown = {r["id"] for r in conn.query(f"SELECT id FROM tasks WHERE id IN ({_marks(claimed)}) AND {seen[0]}",
                                             [*claimed, *seen_params])}
    rows = [{"kind": lease["kind"], "key": lease["key"], "holder": lease["holder"] + (
                f" ({lease['holderInstance']})" if lease.get("holderInstance") else ""),
             "expiresAt": lease["expiresAt"], "fencingToken": lease["fencingToken"]}
            for lease in held if lease["kind"] != "task" or lease["key"] in shown]
    rows += [{"kind": "job", "key": r["name"], "holder": r["owner"], "expiresAt": r["expiresAt"], "fencingToken": None}
             for r in conn.query("SELECT name, owner, expiresAt FROM leases WHERE expiresAt > ? ORDER BY name "
                                 "LIMIT 200", (now,))]
    return rows


# -- Activity ---------------------------------------------------------------------------------
ACTIVITY_SOURCES: dict[str, tuple[str, str, str]] = {
    # kind: (table, time column with an index (time DESC, id DESC), columns who / summary / ref)
    "message": ("messages", "createdAt", "sender AS who, substr(content, 1, 200) AS summary, channel AS ref"),
    "task": ("tasks", "updatedAt", "assignedTo AS who, title AS summary, status AS ref"),
    "memory": ("memories", "createdAt", "createdBy AS who, substr(content, 1, 200) AS summary, namespace AS ref"),
    "mission": ("missions", "updatedAt", "pilot AS who, name AS summary, status AS ref"),
    "human": ("humanActions", "createdAt", "actor AS who, action || ' ' || targetId AS summary, targetKind AS ref"),
}


def _activity_seen(kind: str, readers: Readers, prefixes: tuple[str, ...] | None) -> tuple[list[str], list[Any]]:
    """The rows of one activity source the person may read: messages and tasks by `readers`,
    memories by namespace, people's actions on a message or task by that record's rule."""
    if kind == "message":
        return messaging.visible(readers)
    if kind == "task":
        return tasks.visible(readers)
    if kind == "memory" and prefixes is not None:
        clause, params = sql_filter(prefixes, "memories.namespace")
        return [clause], params
    if kind == "human" and readers is not None:
        (tv,), tp = tasks.visible(readers)
        (mv,), mp = messaging.visible(readers)
        return [f"(targetKind NOT IN ('task', 'message') OR (targetKind = 'task' AND targetId IN "
                f"(SELECT tasks.id FROM tasks WHERE {tv})) OR (targetKind = 'message' AND targetId IN "
                f"(SELECT messages.id FROM messages WHERE {mv})))"], [*tp, *mp]
    return [], []


def activity(conn: Connection, *, kinds: list[str] | None, cursor: str | None, now: int,
             limit: int = 40, readers: Readers = None, prefixes: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The latest events across the team: each source's newest `limit + 1` before the cursor, merged.

    The cursor is the (time, id) of the last event shown; every source reads through its
    (time DESC, id DESC) index, so a page costs the same however long the history is.
    """
    anchor = decode_cursor(cursor)
    at, last_id = (int(anchor[0]), anchor[1] or "") if anchor and isinstance(anchor[0], int) else (now + 1, "")
    rows: list[dict[str, Any]] = []
    for kind, (table, col, cols) in ACTIVITY_SOURCES.items():
        if kinds and kind not in kinds:
            continue
        seen, seen_params = _activity_seen(kind, readers, prefixes)
        sql = (f"SELECT {col} AS at, id, {cols} FROM {table} WHERE ({col} < ? OR ({col} = ? AND id < ?)) "
               + "".join(f"AND {w} " for w in seen) + f"ORDER BY {col} DESC, id DESC LIMIT ?")
        for r in conn.query(sql, (at, at, last_id, *seen_params, limit + 1)):
            rows.append({**r, "kind": kind})
    rows.sort(key=lambda r: (r["at"], r["id"]), reverse=True)
    page: dict[str, Any] = {"items": rows[:limit]}
    if len(rows) > limit:
        page["nextCursor"] = encode_cursor(rows[limit - 1]["at"], rows[limit - 1]["id"])
    return page
