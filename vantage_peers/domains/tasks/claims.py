"""Task claims: the lease `checkout_task` grants (kind `task`, key = the task id).

The claim lives while its holder is seen (presence renews it) or renews it with renew_task_claim.
When it lapses, the sweep calls `on_expired` exactly once (the lease hook registered at the end of
this module): the task goes back to `todo` with its assignee kept (visibly reassignable), an
`[auto]` note says whose claim lapsed and when that instance was last seen, and the task's creator
gets a message. A former holder whose claim lapsed
or was taken over gets LEASE_LOST from complete_task / update_task.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from ...core.errors import InvalidState, NotFound
from ...core.ids import new_id
from ...core.rbac import SYSTEM
from ...db import Connection, Row, loads
from ..leases import hooks as lease_hooks
from ..leases import paths
from ..leases import store as leases
from ..messaging import store as messaging
from . import segments
from .validation import load_task

KIND = "task"


def iso(ms: int | None) -> str:
    if not ms:
        return "never"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def grant_claim(conn: Connection, *, task_id: str, caller: str, instance: str | None, ttl: int,
                now: int) -> dict[str, Any]:
    """The claim of a task just checked out: any older claim still open is superseded."""
    old = [r["id"] for r in conn.query("SELECT id FROM agentLeases WHERE kind = 'task' AND scope = '' AND key = ? "
                                       "AND releasedAt IS NULL", (task_id,))]
    leases.release(conn, ids=old, now=now, reason="superseded", by=caller)
    release_files(conn, task_id=task_id, now=now, reason="superseded")
    row = leases.grant(conn, kind=KIND, scope="", key=task_id, holder=caller, instance=instance, ttl=ttl, now=now)
    return {"leaseId": row["id"], "leaseExpiresAt": row["expiresAt"], "fencingToken": row["fencingToken"]}


def release_claim(conn: Connection, *, task_id: str, now: int, reason: str, by: str | None) -> None:
    """The task left in_progress by its own lifecycle (done, paused, blocked, moved): the claim ends,
    and with it the path reservations taken with it (checkout_task reserveFiles)."""
    conn.execute("UPDATE agentLeases SET releasedAt = ?1, releaseReason = ?2, releasedBy = ?3 "
                 "WHERE ((kind = 'task' AND scope = '' AND key = ?4) OR claimOf = ?4) AND releasedAt IS NULL",
                 (now, reason, by or SYSTEM, task_id))


def release_files(conn: Connection, *, task_id: str, now: int, reason: str) -> None:
    """The path reservations taken with a claim that just ended otherwise (lapsed, superseded)."""
    conn.execute("UPDATE agentLeases SET releasedAt = ?, releaseReason = ?, releasedBy = ? "
                 "WHERE claimOf = ? AND releasedAt IS NULL", (now, reason, SYSTEM, task_id))


def _lost_message(row: Row, caller: str, now: int) -> str:
    if row["holder"] != caller:
        return (f"your claim on task {row['key']} was taken over: {leases.holder_text(row)} holds it since "
                f"{iso(row['grantedAt'])} (fencing token {row['fencingToken']}); do not write its result, "
                "check get_task and coordinate with them")
    when = iso(row["releasedAt"] or row["expiresAt"])
    how = {"expired": "lapsed", "forced": "was force-released", "superseded": "was superseded"}.get(
        row["releaseReason"] or "expired", "lapsed")
    return (f"your claim on task {row['key']} {how} at {when} (fencing token {row['fencingToken']}); the task went "
            "back to todo: checkout_task it again before completing or updating it")


def check_not_lost(conn: Connection, task: Mapping[str, Any], caller: str | None, now: int) -> None:
    """LEASE_LOST when `caller` held a claim on `task` that lapsed or that someone else took over.

    Callers that never held a claim on the task (its creator, `system`, a task never checked out)
    are not concerned: the usual RBAC applies to them."""
    if caller is None or caller == SYSTEM:
        return
    mine = conn.scalar("SELECT 1 FROM agentLeases WHERE kind = 'task' AND scope = '' AND key = ? AND holder = ? "
                       "LIMIT 1", (task["id"], caller))
    if mine is None:
        return
    last = leases.latest(conn, kind=KIND, scope="", key=task["id"])
    assert last is not None
    if last["holder"] != caller:
        raise leases.LeaseLost(_lost_message(last, caller, now))
    if leases.in_force(last, now) or last["releaseReason"] not in (*leases.LOST_REASONS, None):
        return  # held now, or released by the holder's own lifecycle (completed, paused…)
    lapsed_at = last["releasedAt"] or last["expiresAt"]
    seg = segments.open_row(conn, task_id=task["id"])
    if (task.get("status") == "in_progress" and task.get("assignedTo") == caller and seg is not None
            and seg["startedAt"] >= lapsed_at):
        return  # the holder started the task again (start_task / resume_task) after the lapse
    raise leases.LeaseLost(_lost_message(last, caller, now))


def renew_claim(conn: Connection, *, task_id: str, caller: str, now: int) -> dict[str, Any]:
    """renew_task_claim: the caller's claim in force lives another TTL from now."""
    if load_task(conn, task_id) is None:
        raise NotFound(f"task {task_id!r} does not exist")
    rows = conn.query("SELECT id FROM agentLeases WHERE kind = 'task' AND scope = '' AND key = ? AND holder = ? "
                      "AND releasedAt IS NULL", (task_id, caller))
    renewed = leases.renew(conn, ids=[r["id"] for r in rows], holder=caller, now=now)
    if renewed:
        row = renewed[0]
        return {"taskId": task_id, "leaseExpiresAt": row["expiresAt"], "fencingToken": row["fencingToken"]}
    check_not_lost(conn, load_task(conn, task_id) or {"id": task_id}, caller, now)
    raise InvalidState(f"{caller} holds no claim on task {task_id}: only a task you checked out with "
                       "checkout_task has a claim to renew")


def claim_of(conn: Connection, task_id: str, now: int) -> dict[str, Any] | None:
    """The claim in force on a task (get_task shows it)."""
    row = leases.latest(conn, kind=KIND, scope="", key=task_id)
    if not leases.in_force(row, now):
        return None
    assert row is not None
    return {"holder": row["holder"], **({"holderInstance": row["holderInstance"]} if row["holderInstance"] else {}),
            "leaseExpiresAt": row["expiresAt"], "fencingToken": row["fencingToken"]}


def add_note(conn: Connection, *, task_id: str, author: str, content: str, now: int) -> None:
    conn.execute("INSERT INTO taskNotes (id, taskId, author, content, createdAt) VALUES (?, ?, ?, ?, ?)",
                 (new_id("tnt"), task_id, author, content, now))


def notes_of(conn: Connection, task_id: str) -> list[dict[str, Any]]:
    return [{"author": r["author"], "content": r["content"], "createdAt": r["createdAt"]}
            for r in conn.query("SELECT * FROM taskNotes WHERE taskId = ? ORDER BY seq", (task_id,))]


def on_expired(conn: Connection, row: Row, now: int) -> None:
    """A claim just marked expired by the sweep (this runs once per lease): release the task."""
    task = load_task(conn, row["key"])
    release_files(conn, task_id=row["key"], now=now, reason="expired")
    if task is None or task["status"] != "in_progress" or task["assignedTo"] != row["holder"]:
        return  # the task moved on by other means; the lapsed lease only matters for LEASE_LOST
    segments.close_segment(conn, task_id=task["id"], now=now)
    conn.execute("UPDATE tasks SET status = 'todo', paused = 0, pausedAt = NULL, lapsedAt = ?1, updatedAt = ?1 "
                 "WHERE id = ?2", (now, task["id"]))
    seen = conn.scalar("SELECT lastSeen FROM instances WHERE orchestratorId = ? AND instanceId = ?",
                       (row["holder"], row["holderInstance"]))
    who = leases.holder_text(row)
    pool = f"the members of pool {task['pool']}" if task.get("pool") else "any teammate"
    note = (f"[auto] the claim of {who} lapsed at {iso(row['expiresAt'])} (TTL {row['ttlMs'] // 1000}s, fencing "
            f"token {row['fencingToken']}); {who} was last seen {iso(seen)}. The task is back to todo and open: "
            f"{pool} may take it over with checkout_task.")
    add_note(conn, task_id=task["id"], author=SYSTEM, content=note, now=now)
    data = {"event": "claim_lapsed", "taskId": task["id"], "title": task["title"], "holder": row["holder"],
            "holderInstance": row["holderInstance"] or None, "leaseId": row["id"],
            "fencingToken": row["fencingToken"], "lapsedAt": row["expiresAt"], "lastSeen": seen,
            "pool": task.get("pool"), "missionId": task.get("missionId")}
    messaging.send_message(conn, sender=SYSTEM, channel=task["createdBy"],
                           content=f"Task {task['id']} ({task['title']!r}): {note}", data=data)


def expire_task(conn: Connection, *, task_id: str, now: int) -> None:
    """Lazy expiry of one task's claim, before a decision on that task (checkout_task)."""
    for row in leases.expire_due(conn, now=now, kind=KIND, scope="", key=task_id):
        on_expired(conn, row, now)


def reserve_files(conn: Connection, *, task: Mapping[str, Any], caller: str, instance: str | None, ttl: int,
                  repo: str, now: int) -> list[dict[str, Any]]:
    """Reserve a just-claimed task's `files` exclusively, tied to the claim (released with it). All or
    nothing: PATH_CONFLICT names the holders, and the caller's transaction (the claim) rolls back."""
    wanted = paths.clean_patterns(loads(task["files"]) or [], repo, field="files")
    try:
        result = paths.reserve_in_transaction(conn, paths=wanted, repo=repo, holder=caller, instance=instance,
                                              ttl=ttl, now=now, reason=f"task {task['id']}")
    except paths.PathConflict as err:
        raise paths.PathConflict(f"task {task['id']} was not claimed (reserveFiles): {err.detail}") from None
    ids = [g["id"] for g in result["granted"]]
    if ids:
        marks = ",".join("?" * len(ids))
        conn.execute(f"UPDATE agentLeases SET claimOf = ? WHERE id IN ({marks})", [task["id"], *ids])
    return result["granted"]


# Leases sit below tasks: the sweep and renew_task_claim reach a task claim through these hooks
# (registered when the tasks package loads: tasks/__init__.py imports this module).
lease_hooks.on_lapse(KIND, on_expired)
lease_hooks.on_renew(KIND, lambda conn, *, key, holder, now: renew_claim(conn, task_id=key, caller=holder, now=now))
