"""Who may claim a task: the one declared rule (DESIGN.md, "Eligibility is one declared rule").

A task is **reserved** to its assignee while the assignee names a known orchestrator (it has a
profile) and no claim of the task lapsed since. It is **open** when it has no assignee
(`assignedTo` omitted), when its assignee names no profile (a pool name from before pools existed),
or when its last claim lapsed or was force-released (`lapsedAt`, or a claim past its expiry that no
sweep has marked yet): the former holder's name never locks a task. An open task may be claimed by
every member of its `pool` — the orchestrators whose profile lists the pool in `static.pools` or
has it as `static.role` — or by every orchestrator when it has no pool. Its creator and `system`
may always check it out (and the master bearer, and a local caller with no identity).

`parties` turns the rule into the record parties (roles "creator", "assignee", "pool members") the call pipeline checks (`Owns("task claim")` on
checkout_task); `claimable` lists what one orchestrator may take now (list_tasks `claimable`, the
work wake of `vantage-peers wait --for work` and of the task subscription).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...db import Connection, loads
from ..leases import store as leases

UNASSIGNED = ""  # tasks.assignedTo of a task open to its pool (the column is NOT NULL on SQLite)
SCAN_LIMIT = 500  # open tasks read per claimable listing (a team's queue, not a data set)
HINT = ("list_tasks with claimable: true lists the tasks you may take; a task reserved to another "
        "orchestrator is theirs until its claim lapses or its creator reassigns it (update_task assignedTo)")


def pools_of(conn: Connection, who: str) -> set[str]:
    """The pools `who` belongs to: its profile's `static.pools` and `static.role`."""
    row = conn.one("SELECT static FROM profiles WHERE orchestratorId = ?", (who,))
    static = loads(row["static"]) if row is not None else None
    if not isinstance(static, dict):
        return set()
    pools = static.get("pools") or []
    out = {p for p in pools if isinstance(p, str) and p}
    if isinstance(static.get("role"), str) and static["role"]:
        out.add(static["role"])
    return out


def members_of(conn: Connection, pool: str) -> tuple[str, ...]:
    """Orchestrators in `pool`, by name (read from every profile: a team has tens, not millions)."""
    out = []
    for row in conn.query("SELECT orchestratorId, static FROM profiles WHERE static IS NOT NULL "
                          "ORDER BY orchestratorId"):
        static = loads(row["static"])
        if isinstance(static, dict) and (pool == static.get("role") or pool in (static.get("pools") or [])):
            out.append(row["orchestratorId"])
    return tuple(out)


def _known(conn: Connection, who: str) -> bool:
    return conn.scalar("SELECT 1 FROM profiles WHERE orchestratorId = ?", (who,)) is not None


def lapsed(conn: Connection, task: Mapping[str, Any], now: int) -> bool:
    """The task's last claim lapsed or was force-released (marked, or past expiry and not yet swept)."""
    if task["status"] not in ("todo", "in_progress"):
        return False
    if task["status"] == "todo" and task.get("lapsedAt") is not None:
        return True
    last = leases.latest(conn, kind="task", scope="", key=task["id"], columns=leases.LATEST_STATE)
    if last is None or last["holder"] != task["assignedTo"]:
        return False
    if last["releasedAt"] is None:
        return last["expiresAt"] <= now  # lapsed, the sweep has not run yet
    return task["status"] == "todo" and last["releaseReason"] in ("expired", "forced")


def is_open(conn: Connection, task: Mapping[str, Any], now: int) -> bool:
    who = task["assignedTo"]
    return who == UNASSIGNED or not _known(conn, who) or lapsed(conn, task, now)


def parties(conn: Connection, task: Mapping[str, Any], now: int) -> dict[str, Any]:
    """The record parties of a claim: creator always; the assignee of a reserved task; the members of
    an open task's pool; `assignee: None` for an open task without a pool (anyone may take it)."""
    out: dict[str, Any] = {"creator": task["createdBy"]}
    if (task["status"] != "todo" or task["paused"]) and not lapsed(conn, task, now):
        out["assignee"] = None  # nothing to claim: checkout answers `claimed: false` with the reason
    elif not is_open(conn, task, now):
        out["assignee"] = task["assignedTo"]
    elif task.get("pool"):
        out["assignee"] = f"pool:{task['pool']}"  # not empty: the pool's members below decide
        out["pool members"] = members_of(conn, task["pool"]) or None
    else:
        out["assignee"] = None
    return out


def claimable(conn: Connection, *, who: str, instance: str | None, now: int,
              limit: int = SCAN_LIMIT) -> list[dict[str, Any]]:
    """Todo tasks `who` may check out now, oldest change first: reserved to it or open to it, not
    paused, every dependency done or cancelled. Rows as stored (lapsedAt included).

    The SQL keeps exactly the todo tasks that are reserved to `who` or open (no assignee, a lapsed
    claim, an assignee without a profile); what is left is the pool test and the dependencies, read
    in one query each: this runs on every commit for every subscribed task queue."""
    pools = pools_of(conn, who)
    rows = conn.query(
        "SELECT * FROM tasks WHERE status = 'todo' AND paused = 0 AND (assignedTo IN (?, '') OR lapsedAt IS NOT NULL "
        "OR NOT EXISTS (SELECT 1 FROM profiles p WHERE p.orchestratorId = tasks.assignedTo)) "
        "ORDER BY updatedAt, id LIMIT ?", (who, limit))
    out = []
    for row in rows:
        mine = row["assignedTo"] == who and row["lapsedAt"] is None
        if mine and instance and row["assignedToInstance"] not in (None, "", instance):
            continue  # reserved to another instance of the same orchestrator
        if not mine and row["pool"] and row["pool"] not in pools:
            continue
        out.append(row)
    waiting = open_dependencies_of(conn, out)
    return [r for r in out if r["id"] not in waiting]


def open_dependencies_of(conn: Connection, tasks: list[Mapping[str, Any]]) -> set[str]:
    """Ids among `tasks` with a dependency not done yet (cancelled and missing ones never will be)."""
    deps = {t["id"]: loads(t["dependsOn"]) if isinstance(t["dependsOn"], str) else t["dependsOn"] for t in tasks}
    wanted = sorted({d for ds in deps.values() if ds for d in ds})
    if not wanted:
        return set()
    open_ids: set[str] = set()
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        marks = ",".join("?" for _ in chunk)
        open_ids |= {r["id"] for r in conn.query(
            f"SELECT id FROM tasks WHERE id IN ({marks}) AND status NOT IN ('done', 'cancelled')", chunk)}
    return {tid for tid, ds in deps.items() if ds and open_ids.intersection(ds)}
