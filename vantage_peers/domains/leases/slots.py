"""Named slots: leases of kind `slot` with a capacity ("one deploy at a time", "two e2e runs at most").

The count of holders in force and the grant run in one `BEGIN IMMEDIATE` transaction, after the
slot's expired leases are swept. The capacity in force is the smallest one declared by the
request and by the current holders, so a caller asking for more room cannot crowd out a limit
others rely on.
"""

from __future__ import annotations

from typing import Any

from ...core.errors import InvalidArgument
from ...db import Connection
from ...db.paging import clamp_limit, decode_cursor, encode_cursor
from . import store as leases
from . import sweep

KIND = "slot"
MAX_CAPACITY = 1_000
MAX_NAME_CHARS = 200


def check_name(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME_CHARS or "\x00" in value:
        raise InvalidArgument(f"{field} must be a non-empty string of at most {MAX_NAME_CHARS} characters, "
                              "e.g. 'deploy-prod'")
    return value.strip()


def clean_capacity(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CAPACITY:
        raise InvalidArgument(f"capacity must be an integer from 1 to {MAX_CAPACITY}")
    return value


def _holders(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"holder": leases.holder_text(r), "id": r["id"], "expiresAt": r["expiresAt"],
             "fencingToken": r["fencingToken"], **({"reason": r["reason"]} if r["reason"] else {})} for r in rows]


def acquire(conn: Connection, *, name: str, capacity: int, ttl: int, holder: str, instance: str | None,
            reason: str | None, now: int) -> dict[str, Any]:
    name = check_name(name, "name")
    sweep.expire_due(conn, now=now, kind=KIND, key=name)
    held = leases.active(conn, kind=KIND, scope="", key=name, now=now)
    own = [r for r in held if r["holder"] == holder and r["holderInstance"] == (instance or "")]
    if own:  # acquiring a slot one holds renews it
        row = leases.renew(conn, ids=[own[0]["id"]], holder=holder, now=now)[0]
        return {"acquired": True, "renewed": True, "id": row["id"], "name": name, "expiresAt": row["expiresAt"],
                "fencingToken": row["fencingToken"], "capacity": row["capacity"]}
    limit = min([capacity, *(r["capacity"] for r in held)])
    if len(held) >= limit:
        return {"acquired": False, "name": name, "capacity": limit, "holders": _holders(held),
                "retryAfter": min(r["expiresAt"] for r in held)}
    row = leases.grant(conn, kind=KIND, scope="", key=name, holder=holder, instance=instance, ttl=ttl, now=now,
                       capacity=capacity, reason=reason)
    return {"acquired": True, "id": row["id"], "name": name, "expiresAt": row["expiresAt"],
            "fencingToken": row["fencingToken"], "capacity": limit}


def release(conn: Connection, *, name: str, holder: str, instance: str | None, now: int) -> dict[str, Any]:
    name = check_name(name, "name")
    where = " AND holderInstance = ?" if instance is not None else ""
    ids = [r["id"] for r in conn.query(
        "SELECT id FROM agentLeases WHERE kind = 'slot' AND scope = '' AND key = ? AND holder = ? "
        f"AND releasedAt IS NULL{where}", [name, holder, *([instance] if instance is not None else [])])]
    released = leases.release(conn, ids=ids, now=now, reason="released", by=holder, holder=holder)
    return {"released": len(released) > 0, "name": name, "count": len(released)}


def list_slots(conn: Connection, *, now: int, name: str | None = None, limit: int | None = None,
               cursor: str | None = None) -> dict[str, Any]:
    """Slots in use by name, `{items: [{name, capacity, inUse, free, holders}], nextCursor?}`."""
    size = clamp_limit(limit)
    after = decode_cursor(cursor)
    where, args = ["kind = 'slot'", "releasedAt IS NULL", "expiresAt > ?"], [now]
    if name is not None:
        where.append("key = ?")
        args.append(check_name(name, "name"))
    if after is not None:
        where.append("key > ?")
        args.append(str(after[0]))
    names = [r["key"] for r in conn.query(f"SELECT DISTINCT key FROM agentLeases WHERE {' AND '.join(where)} "
                                          "ORDER BY key LIMIT ?", [*args, size + 1])]
    items = []
    for key in names[:size]:
        held = leases.active(conn, kind=KIND, scope="", key=key, now=now)
        cap = min(r["capacity"] for r in held)
        items.append({"name": key, "capacity": cap, "inUse": len(held), "free": max(0, cap - len(held)),
                      "holders": _holders(held)})
    out: dict[str, Any] = {"items": items}
    if len(names) > size:
        out["nextCursor"] = encode_cursor(names[size - 1], names[size - 1])
    return out
