"""The lease primitive under task claims, path reservations and named slots (docs/leases.md).

A lease row has a kind, a key (within a scope: the repo of a path, '' otherwise), a holder
(orchestrator + instance), a TTL and `expiresAt`, and a fencing token taken from `leaseFences`,
which grows by one on every grant of the key. Every decision is one statement run inside the
caller's `BEGIN IMMEDIATE` transaction, guarded by `releasedAt IS NULL` (compare-and-set): of any
number of processes sweeping, releasing or renewing the same row, exactly one changes it.

A lease whose `expiresAt` has passed is not active, whether or not a sweep has marked it yet
(lazy on read); the sweep (`sweep.expire_due`, a scheduler job and the first step of every grant)
marks it `expired` once and runs the kind's consequences (a task goes back to todo).

A lease also records `holderSession`: the session id of the server process whose own identity was
granted it (or last renewed it by hand), bound for the duration of a call by `bind_session` (the
profiles domain does, for calls of a stdio process); NULL otherwise. Presence renews only the leases
of the refreshing process's session (and session-less ones): a restarted process does not silently
keep its dead predecessor's leases alive (docs/presence.md).

No MCP or HTTP here: this module is called by stores (tasks, profiles' presence refresh) and tools.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from typing import Any

from ...core.errors import InvalidArgument, VantageError
from ...core.ids import new_id
from ...core.parties import SYSTEM
from ...db import Connection, Row
from ...db.paging import keyset_page

KINDS = ("task", "path", "slot")
MIN_TTL_SECONDS = 1
MAX_TTL_SECONDS = 7 * 24 * 3600  # a week: a longer lease is a lock nobody remembers
LOST_REASONS = ("expired", "forced", "superseded")
# The session of the server process the current call runs in, when it acts as that process's identity.
_SESSION: ContextVar[str | None] = ContextVar("vp_holder_session", default=None)


def bind_session(session: str | None) -> None:
    """Grants and hand renewals in the current context (one tool call) record `session` as the holder's."""
    _SESSION.set(session)


def holder_session() -> str | None:
    return _SESSION.get()


class LeaseLost(VantageError):
    """The caller's lease lapsed or was taken over: acting on it now could overwrite someone's work."""

    code = "LEASE_LOST"


def ttl_ms(seconds: Any, field: str = "ttlSeconds") -> int:
    """A TTL argument in seconds as ms, refused outside 1 s .. 7 days."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise InvalidArgument(f"{field} must be a number of seconds")
    if not MIN_TTL_SECONDS <= seconds <= MAX_TTL_SECONDS:
        raise InvalidArgument(f"{field} must be between {MIN_TTL_SECONDS} and {MAX_TTL_SECONDS} seconds "
                              f"(7 days), got {seconds:g}")
    return int(seconds * 1000)


def holder_text(row: Row) -> str:
    return row["holder"] + (f"/{row['holderInstance']}" if row.get("holderInstance") else "")


def lease_doc(row: Row) -> dict[str, Any]:
    """A lease as the tools show it (times in Unix ms)."""
    doc: dict[str, Any] = {"id": row["id"], "kind": row["kind"], "key": row["key"], "holder": row["holder"]}
    if row["holderInstance"]:
        doc["holderInstance"] = row["holderInstance"]
    if row["kind"] == "path":
        doc["path"], doc["repo"], doc["exclusive"] = row["key"], row["scope"], bool(row["exclusive"])
    if row["kind"] == "slot":
        doc["capacity"] = row["capacity"]
    doc.update(fencingToken=row["fencingToken"], grantedAt=row["grantedAt"], renewedAt=row["renewedAt"],
               expiresAt=row["expiresAt"], ttlSeconds=row["ttlMs"] / 1000)
    if row.get("reason"):
        doc["reason"] = row["reason"]
    if row.get("releasedAt") is not None:
        doc.update(releasedAt=row["releasedAt"], releaseReason=row["releaseReason"])
    return doc


def next_fence(conn: Connection, kind: str, scope: str, key: str) -> int:
    """The next fencing token of (kind, scope, key): +1 per grant, in the granting transaction."""
    return int(conn.scalar(
        "INSERT INTO leaseFences (kind, scope, key, token) VALUES (?, ?, ?, 1) "
        "ON CONFLICT (kind, scope, key) DO UPDATE SET token = leaseFences.token + 1 RETURNING token", (kind, scope, key)))


def grant(conn: Connection, *, kind: str, scope: str, key: str, holder: str, instance: str | None,
          ttl: int, now: int, exclusive: bool = True, capacity: int = 1, reason: str | None = None,
          fence_key: str | None = None) -> Row:
    """Insert a granted lease with the key's next fencing token (the caller decided it is free).

    `fence_key` shares one counter between keys (every path of a repo: overlapping globs are
    different keys, but their grants must still be ordered)."""
    token = next_fence(conn, kind, scope, key if fence_key is None else fence_key)
    row = conn.one(
        "INSERT INTO agentLeases (id, kind, scope, key, holder, holderInstance, exclusive, capacity, ttlMs, "
        "fencingToken, reason, grantedAt, renewedAt, expiresAt, holderSession) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
        (new_id("lse"), kind, scope, key, holder, instance or "", 1 if exclusive else 0, capacity, ttl, token,
         reason, now, now, now + ttl, holder_session()))
    assert row is not None
    return row


def active(conn: Connection, *, kind: str, now: int, scope: str | None = None, key: str | None = None,
           holder: str | None = None) -> list[Row]:
    """Leases in force now (unreleased and unexpired), oldest grant first."""
    where, args = ["kind = ?", "releasedAt IS NULL", "expiresAt > ?"], [kind, now]
    for column, value in (("scope", scope), ("key", key), ("holder", holder)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    return conn.query(f"SELECT * FROM agentLeases WHERE {' AND '.join(where)} ORDER BY seq", args)


def expire_due(conn: Connection, *, now: int, kind: str | None = None, scope: str | None = None,
               key: str | None = None, limit: int = 500) -> list[Row]:
    """Mark unreleased leases past `expiresAt` as expired; returns exactly the rows this call changed."""
    where, args = ["releasedAt IS NULL", "expiresAt <= ?1"], [now]
    for column, value in (("kind", kind), ("scope", scope), ("key", key)):
        if value is not None:
            args.append(value)
            where.append(f"{column} = ?{len(args)}")
    update = f"UPDATE agentLeases SET releasedAt = ?1, releaseReason = 'expired', releasedBy = '{SYSTEM}' "
    if key is not None and kind is not None and scope is not None:
        # One key holds at most its capacity unreleased (checkout_task's lazy expiry, every call): the
        # plain UPDATE reads the active index, where the oldest-first LIMIT subquery sorted (5 vs 44 µs).
        return sorted(conn.query(f"{update}WHERE {' AND '.join(where)} RETURNING *", args),
                      key=lambda r: (r["expiresAt"], r["seq"]))
    args.append(limit)
    return conn.query(
        f"{update}WHERE seq IN (SELECT seq FROM agentLeases WHERE {' AND '.join(where)} ORDER BY expiresAt "
        f"LIMIT ?{len(args)}) RETURNING *", args)


def release(conn: Connection, *, ids: Sequence[str], now: int, reason: str, by: str,
            holder: str | None = None) -> list[Row]:
    """Release unreleased leases among `ids` (only `holder`'s when given); returns those released."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    owner = " AND holder = ?" if holder is not None else ""
    return conn.query(
        f"UPDATE agentLeases SET releasedAt = ?, releaseReason = ?, releasedBy = ? WHERE id IN ({marks}) "
        f"AND releasedAt IS NULL{owner} RETURNING *",
        [now, reason, by, *ids, *([holder] if holder is not None else [])])


def renew(conn: Connection, *, ids: Sequence[str], holder: str, now: int) -> list[Row]:
    """Extend the holder's leases in force among `ids` by their TTL; a lapsed lease is not revived.

    A renewal by hand from a server process adopts the lease: it becomes that process's session's
    (how a restarted process resumes what its predecessor held)."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    return conn.query(
        "UPDATE agentLeases SET renewedAt = ?, expiresAt = ? + ttlMs, holderSession = coalesce(?, holderSession) "
        f"WHERE id IN ({marks}) AND holder = ? AND releasedAt IS NULL AND expiresAt > ? RETURNING *",
        [now, now, holder_session(), *ids, holder, now])


def renew_for_holder(conn: Connection, *, holder: str, instance: str | None, now: int,
                     session: str | None = None) -> int:
    """Presence: every lease in force of this orchestrator instance lives another TTL from now.

    With `session` (the refreshing server process's), only that session's leases and session-less
    ones: the leases of another process of the same identity live or lapse with that process."""
    mine = " AND (holderSession IS NULL OR holderSession = ?4)" if session is not None else ""
    return conn.execute(
        "UPDATE agentLeases SET renewedAt = ?1, expiresAt = ?1 + ttlMs WHERE holder = ?2 AND holderInstance = ?3 "
        f"AND releasedAt IS NULL AND expiresAt > ?1{mine}",
        (now, holder, instance or "", *([session] if session is not None else [])))


def by_ids(conn: Connection, ids: Iterable[str]) -> list[Row]:
    ids = list(ids)
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    return conn.query(f"SELECT * FROM agentLeases WHERE id IN ({marks}) ORDER BY seq", ids)


LATEST_STATE = "holder, releasedAt, expiresAt, releaseReason"  # what a claim's state needs (eligibility.py)


def latest(conn: Connection, *, kind: str, scope: str, key: str, columns: str = "*") -> Row | None:
    """The most recent grant of a key (highest fencing token); `columns` a code constant (LATEST_STATE:
    half the time of every column on the checkout path)."""
    return conn.one(f"SELECT {columns} FROM agentLeases WHERE kind = ? AND scope = ? AND key = ? "
                    "ORDER BY fencingToken DESC, seq DESC LIMIT 1", (kind, scope, key))


def in_force(row: Row | None, now: int) -> bool:
    return row is not None and row["releasedAt"] is None and row["expiresAt"] > now


LEASE_LITE = ("id", "kind", "key", "holder", "expiresAt")


def page(conn: Connection, *, now: int, kind: str | None = None, scope: str | None = None,
         holder: str | None = None, limit: int | None = None, cursor: str | None = None,
         fields: str | None = "full") -> dict[str, Any]:
    """Leases in force, newest grant first, as `{items, nextCursor?}` (the list_* tools)."""
    where, args = ["releasedAt IS NULL", "expiresAt > ?"], [now]
    for column, value in (("kind", kind), ("scope", scope), ("holder", holder)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    return keyset_page(conn, table="agentLeases", to_item=lease_doc, where=where, params=args,
                       sort_col="grantedAt", limit=limit, cursor=cursor, fields=fields, lite_keys=LEASE_LITE)


def overview(conn: Connection, *, now: int, limit: int = 200) -> list[dict[str, Any]]:
    """Every lease in force, soonest expiry first (status, the dashboard)."""
    rows = conn.query("SELECT * FROM agentLeases WHERE releasedAt IS NULL AND expiresAt > ? "
                      "ORDER BY expiresAt, seq LIMIT ?", (now, limit))
    return [lease_doc(r) for r in rows]
