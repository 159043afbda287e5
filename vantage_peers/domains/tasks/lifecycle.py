"""Task lifecycle verbs: start, pause, resume, complete, block, checkout, dependencies, and the
status transitions of update_task. Each runs inside the caller's one `BEGIN IMMEDIATE` transaction.

Invariant kept by every verb: a task has an open work segment iff it is `in_progress` (tasks made
`in_progress` before segment tracking are the only exception, and get an "inferred" duration).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...core.errors import InvalidArgument, InvalidState
from ...core.validators import Checker
from ...db import Connection, dumps, loads
from ..missions import store as missions
from . import claims, segments
from .issue_links import TaskDone
from .rules import SYSTEM, TERMINAL_TASK, authorize
from .store import apply_fields, require_task
from .validation import (
    REASON_MAX_BYTES,
    check_references,
    completion_failures,
    raise_failures,
    update_failures,
)

DEFAULT_CLAIM_TTL_MS = 1_800_000  # VP_CLAIM_TTL_SECONDS overrides it in the tool


def _refuse_if_caller_busy(conn: Connection, caller: str | None, task_id: str) -> None:
    if caller is None or caller == SYSTEM:
        return
    other = segments.running_task_of(conn, orchestrator=caller, other_than=task_id)
    if other is not None:
        raise InvalidState(f"{caller} already has another task in progress with an open work segment: "
                           f"{other['id']} ({other['title']!r}); pause_task or complete_task it first")


def _set_status(conn: Connection, task_id: str, status: str, now: int, extra: str = "") -> None:
    conn.execute(f"UPDATE tasks SET status = ?, updatedAt = ?{extra} WHERE id = ?", (status, now, task_id))


def _run(conn: Connection, task: Mapping[str, Any], who: str | None, now: int) -> None:
    """Put the task in progress with a new open segment (first start keeps its startedAt)."""
    segments.close_segment(conn, task_id=task["id"], now=now)
    _set_status(conn, task["id"], "in_progress", now,
                ", startedAt = coalesce(startedAt, ?2), paused = 0, pausedAt = NULL, blockedBy = NULL")
    segments.open_segment(conn, task_id=task["id"], who=who or task["assignedTo"], now=now)


def finish(conn: Connection, task: Mapping[str, Any], *, note: str, now: int,
           actual_minutes: float | None = None, completed_at: int | None = None,
           on_done: TaskDone | None = None) -> None:
    """Make `task` done: close its segment, compute actualMinutes, then complete its mission if
    every task is done and run `on_done(conn, task)` (the App's task-done hooks: `app.task_done`). `completed_at` is an explicit
    completedAt given with update_task (default: now)."""
    segments.close_segment(conn, task_id=task["id"], now=now)
    total, count = segments.worked_ms(conn, task_id=task["id"])
    source = None
    if actual_minutes is None:
        if count:
            actual_minutes, source = round(total / 60_000, 2), "measured"
        elif task.get("startedAt"):
            actual_minutes, source = round(max(0, now - task["startedAt"]) / 60_000, 2), "inferred"
    conn.execute(
        "UPDATE tasks SET status = 'done', completedAt = ?, completionNote = ?, actualMinutes = coalesce(?, "
        "actualMinutes), durationSource = coalesce(?, durationSource), paused = 0, pausedAt = NULL, "
        "updatedAt = ? WHERE id = ?",
        (completed_at or now, note, actual_minutes, source, now, task["id"]),
    )
    claims.release_claim(conn, task_id=task["id"], now=now, reason="completed", by=None)
    missions.complete_if_all_done(conn, task.get("missionId"), now)
    if on_done is not None:
        on_done(conn, {**task, "status": "done", "completionNote": note})


def start_task(conn: Connection, *, task_id: str, caller: str | None, now: int) -> None:
    task = require_task(conn, task_id)
    authorize(caller, task, "start")
    if task["status"] in TERMINAL_TASK:
        raise InvalidState(f"task {task_id} is {task['status']}; it cannot be started again (create a new task)")
    seg = segments.open_row(conn, task_id=task_id)
    if seg is not None:
        who = f" by {seg['orchestrator']}" if seg["orchestrator"] else ""
        raise InvalidState(
            f"task {task_id} already has an open work segment (started at {seg['startedAt']} ms{who}): someone is "
            "working on it. Call pause_task to stop the clock, complete_task to finish it, or block_task if it "
            "waits on someone; resume_task is only for a paused task")
    _refuse_if_caller_busy(conn, caller, task_id)
    _run(conn, task, caller if caller != SYSTEM else None, now)


def pause_task(conn: Connection, *, task_id: str, caller: str | None, now: int) -> None:
    task = require_task(conn, task_id)
    claims.check_not_lost(conn, task, caller, now)
    authorize(caller, task, "pause")
    if task["paused"]:
        raise InvalidState(f"task {task_id} is already paused; call resume_task to continue it")
    if not segments.close_segment(conn, task_id=task_id, now=now):
        raise InvalidState(f"task {task_id} has no open work segment (status {task['status']}): nothing to pause; "
                           "start_task opens one")
    _set_status(conn, task_id, "todo", now, ", paused = 1, pausedAt = ?2")
    claims.release_claim(conn, task_id=task_id, now=now, reason="paused", by=caller)


def resume_task(conn: Connection, *, task_id: str, caller: str | None, now: int) -> None:
    task = require_task(conn, task_id)
    authorize(caller, task, "resume")
    if not task["paused"]:
        hint = {"in_progress": "it is already running", "todo": "use start_task or checkout_task",
                "blocked": "unblock it with start_task or update_task"}.get(task["status"], "")
        raise InvalidState(f"task {task_id} is not paused (status {task['status']}); resume_task only continues "
                           f"a paused task{'; ' + hint if hint else ''}")
    _refuse_if_caller_busy(conn, caller, task_id)
    _run(conn, task, caller if caller != SYSTEM else None, now)


def complete_task(conn: Connection, *, task_id: str, note: Any, caller: str | None, now: int,
                  max_minutes: int, on_done: TaskDone | None = None) -> None:
    task = require_task(conn, task_id)
    claims.check_not_lost(conn, task, caller, now)  # LEASE_LOST before any other verdict
    raise_failures(completion_failures(conn, task, note, caller=caller, now=now, max_minutes=max_minutes))
    finish(conn, task, note=note, now=now, on_done=on_done)


def block_task(conn: Connection, *, task_id: str, reason: Any, caller: str | None, now: int) -> None:
    task = require_task(conn, task_id)
    claims.check_not_lost(conn, task, caller, now)
    authorize(caller, task, "block")
    chk = Checker({"reason": reason})
    chk.text("reason", required=True, max_bytes=REASON_MAX_BYTES, example="waiting on pi for the API key since 10:00")
    raise_failures(chk.failures)
    if task["status"] in TERMINAL_TASK:
        raise InvalidState(f"task {task_id} is {task['status']} and cannot be blocked")
    segments.close_segment(conn, task_id=task_id, now=now)
    conn.execute("UPDATE tasks SET status = 'blocked', blockedBy = ?, paused = 0, pausedAt = NULL, updatedAt = ? "
                 "WHERE id = ?", (reason, now, task_id))
    claims.release_claim(conn, task_id=task_id, now=now, reason="blocked", by=caller)


def add_dependency(conn: Connection, *, task_id: str, depends_on: Any, caller: str | None,
                   now: int) -> list[str]:
    task = require_task(conn, task_id)
    claims.check_not_lost(conn, task, caller, now)
    authorize(caller, task, "change")
    if not isinstance(depends_on, str) or not depends_on:
        raise InvalidArgument("dependsOn must be one task id")
    chk = Checker({"dependsOn": [depends_on]})
    check_references(conn, chk, task_id=task_id)
    raise_failures(chk.failures)
    deps = list(task["dependsOn"])
    if depends_on not in deps:
        deps.append(depends_on)
        conn.execute("UPDATE tasks SET dependsOn = ?, updatedAt = ? WHERE id = ?", (dumps(deps), now, task_id))
    return deps


def update_task(conn: Connection, *, task_id: str, payload: Mapping[str, Any], now: int,
                max_minutes: int, on_done: TaskDone | None = None) -> None:
    """Partial update; a status change follows the lifecycle (segments, pause marker, completion)."""
    before = require_task(conn, task_id)
    caller = payload.get("callerOrchestrator")
    claims.check_not_lost(conn, before, caller if isinstance(caller, str) else None, now)
    raise_failures(update_failures(conn, before, payload, now=now, max_minutes=max_minutes))
    apply_fields(conn, task_id=task_id, payload=payload, now=now)
    status = payload.get("status")
    releases_pause = status == "todo" and before["paused"]
    if status is not None and (status != before["status"] or releases_pause):
        task = require_task(conn, task_id)
        if status == "done":
            finish(conn, task, note=task["completionNote"], now=now, actual_minutes=payload.get("actualMinutes"),
                   completed_at=payload.get("completedAt"), on_done=on_done)
        elif status == "in_progress":
            _run(conn, task, None, now)
        else:
            # todo / review / blocked / cancelled: the clock stops; an explicit todo releases a pause.
            segments.close_segment(conn, task_id=task_id, now=now)
            keep_blocker = ", blockedBy = NULL" if status != "blocked" else ""
            _set_status(conn, task_id, status, now, f", paused = 0, pausedAt = NULL{keep_blocker}")
            claims.release_claim(conn, task_id=task_id, now=now, reason=status, by=None)
    # A task cancelled or moved to another mission may leave only done tasks behind in its mission;
    # re-check it so that completion does not depend on the order of the calls.
    moved = payload.get("missionId") not in (None, before["missionId"])
    if moved or (status == "cancelled" and before["status"] != "cancelled"):
        missions.complete_if_all_done(conn, before["missionId"], now)


def checkout_task(conn: Connection, *, task_id: str, caller: str, instance: str | None,
                  now: int, ttl: int = DEFAULT_CLAIM_TTL_MS, reserve_files: bool = False,
                  repo: str = "") -> dict[str, Any]:
    """Claim a todo, non-paused task. The decision is the single conditional UPDATE below, so when
    many agents race (in any number of processes) exactly one changes the row. The winner gets a
    claim lease of `ttl` ms (claims.py); a lapsed claim is expired first, so its task is claimable.
    With `reserve_files`, the task's `files` are reserved in the same transaction (PATH_CONFLICT
    undoes the claim too) and released with it."""
    claims.expire_task(conn, task_id=task_id, now=now)
    # The claimed row comes back from the UPDATE itself (one round trip less on PostgreSQL).
    task = conn.one(
        "UPDATE tasks SET status = 'in_progress', assignedTo = ?, assignedToInstance = ?, "
        "startedAt = coalesce(startedAt, ?), blockedBy = NULL, lapsedAt = NULL, updatedAt = ? "
        "WHERE id = ? AND status = 'todo' AND paused = 0 RETURNING id, files",
        (caller, instance, now, now, task_id),
    )
    if task is not None:
        segments.close_segment(conn, task_id=task_id, now=now)
        segments.open_segment(conn, task_id=task_id, who=caller, now=now)
        lease = claims.grant_claim(conn, task_id=task_id, caller=caller, instance=instance, ttl=ttl, now=now)
        out = {"claimed": True, "leaseExpiresAt": lease["leaseExpiresAt"], "fencingToken": lease["fencingToken"]}
        if task.get("files"):
            out["files"] = loads(task["files"])
        if reserve_files and task.get("files"):
            out["reservations"] = claims.reserve_files(conn, task=task, caller=caller, instance=instance, ttl=ttl,
                                                       repo=repo, now=now)
        return out
    task = require_task(conn, task_id)
    if task["paused"]:
        reason = (f"task is paused by its owner {task['assignedTo']}: it stays reserved to them, and they "
                  "continue it with resume_task")
    elif task["status"] == "in_progress" and task["assignedTo"] == caller:
        reason = f"task is already in_progress and assigned to you ({caller})"
    else:
        reason = (f"task is {task['status']} (assigned to {task['assignedTo']}), not todo: only todo tasks "
                  "can be claimed")
    return {"claimed": False, "reason": reason}
