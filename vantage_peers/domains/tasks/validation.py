"""Payload checks shared by the write tools and `validate_task_payload`.

Each check returns a list of `Failure`s (`validators.Checker` collects them) (field, code, message, fix snippet) instead of raising, so
the lint tool can report all of them; the real tools call the very same functions and raise the
first failure. Field checks look at raw JSON values, because the lint tool receives an untyped
payload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...core import parties
from ...core.errors import Conflict, Forbidden, InvalidArgument, InvalidState, NotFound, VantageError
from ...core.validators import Checker, Failure
from ...db import Connection, loads
from . import segments
from .rules import OPEN_STATUSES, PRIORITIES, SYSTEM, TASK_STATUSES, rbac_denial

TITLE_MAX_BYTES = 2_000
DESCRIPTION_MAX_BYTES = 200_000
NOTE_MAX_BYTES = 100_000
REASON_MAX_BYTES = 10_000
MAX_TAGS = 50
MAX_DEPENDS = 200
MAX_FILES = 200

_ERRORS: dict[str, type[VantageError]] = {
    "INVALID_ARGUMENT": InvalidArgument, "NOT_FOUND": NotFound, "INVALID_STATE": InvalidState,
    "RBAC_DENIED": Forbidden, "CONFLICT": Conflict,
}


def raise_failures(failures: list[Failure]) -> None:
    """Raise the first failure as its error (the message counts the others)."""
    if not failures:
        return
    first = failures[0]
    more = len(failures) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''}; validate_task_payload lists them all)" if more else ""
    raise _ERRORS.get(first.code, InvalidArgument)(first.message + suffix)


# -- shared checks --------------------------------------------------------------------------
def check_fields(chk: Checker, *, creating: bool) -> None:
    """Type, enum and size checks of every task field present in the payload."""
    chk.text("title", required=creating, max_bytes=TITLE_MAX_BYTES, example="Fix login redirect (#123)")
    chk.text("description", max_bytes=DESCRIPTION_MAX_BYTES, example="What to do. VERIFICATION: ... TESTS: ...")
    chk.text("project", max_bytes=1_000, example="studio/acme")
    chk.strings("tags", max_items=MAX_TAGS, max_len=100, example=["backend"])
    chk.name("assignedTo")  # omitted: open to its pool (or the whole team)
    chk.name("pool", example="backend")
    chk.strings("files", max_items=MAX_FILES, max_len=1_000, example=["src/api/**", "README.md"])
    chk.name("assignedToInstance", example="sigma-vps-01")
    chk.enum("priority", PRIORITIES, required=creating, example="high")
    chk.text("missionId", max_bytes=200, example="msn_...")
    chk.number("estimatedMinutes", example=60)
    chk.number("dueDate", integer=True, example=1_790_000_000_000)
    chk.name("createdBy", required=creating)
    if not creating:
        chk.number("actualMinutes", example=45)
        chk.number("startedAt", integer=True, example=1_790_000_000_000)
        chk.number("completedAt", integer=True, example=1_790_000_000_000)
        chk.text("completionNote", max_bytes=NOTE_MAX_BYTES, example="What was done, with proof (commit, PR, tests)")
        chk.text("cancelReason", max_bytes=REASON_MAX_BYTES, example="created on the wrong project")
        chk.name("callerOrchestrator")
    deps = chk.payload.get("dependsOn")
    if deps is not None and (not isinstance(deps, list) or not all(isinstance(d, str) and d for d in deps)):
        chk.fail("dependsOn", "dependsOn must be an array of task ids", {"dependsOn": ["tsk_..."]})
    elif isinstance(deps, list) and len(deps) > MAX_DEPENDS:
        chk.fail("dependsOn", f"dependsOn holds more than {MAX_DEPENDS} ids", {"dependsOn": deps[:MAX_DEPENDS]})


def check_references(conn: Connection, chk: Checker, *, task_id: str | None = None) -> None:
    """missionId and dependsOn must name existing rows; dependencies must not form a cycle."""
    mission = chk.payload.get("missionId")
    if isinstance(mission, str) and mission and conn.scalar("SELECT 1 FROM missions WHERE id = ?", (mission,)) is None:
        chk.fail("missionId", f"mission {mission} does not exist; create it with create_mission or omit missionId",
                 {"missionId": None}, "NOT_FOUND")
    deps = chk.payload.get("dependsOn")
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps) or not deps:
        return
    unique = list(dict.fromkeys(deps))
    marks = ",".join("?" for _ in unique)
    known = {r["id"] for r in conn.query(f"SELECT id FROM tasks WHERE id IN ({marks})", unique)}
    unknown = [d for d in unique if d not in known]
    if unknown:
        chk.fail("dependsOn", f"dependsOn names unknown task ids: {', '.join(unknown[:10])}",
                 {"dependsOn": [d for d in unique if d in known]}, "NOT_FOUND")
    if task_id is not None:
        if task_id in unique:
            chk.fail("dependsOn", "a task cannot depend on itself", {"dependsOn": [d for d in unique if d != task_id]})
        for dep in unique:
            if dep != task_id and dep in known and reaches(conn, start=dep, target=task_id):
                chk.fail("dependsOn", f"depending on {dep} would create a cycle: {dep} already depends "
                         f"(directly or not) on {task_id}", {"dependsOn": [d for d in unique if d != dep]}, "CONFLICT")


def reaches(conn: Connection, *, start: str, target: str) -> bool:
    """Whether `start` depends, directly or transitively, on `target`."""
    return bool(conn.scalar(
        "WITH RECURSIVE reach(id) AS (SELECT ? UNION SELECT j.value FROM reach "
        "JOIN tasks t ON t.id = reach.id, json_each(coalesce(t.dependsOn, '[]')) j) "
        "SELECT 1 FROM reach WHERE id = ? LIMIT 1",
        (start, target),
    ))


def long_segment(conn: Connection, *, task_id: str, now: int, max_minutes: int) -> Failure | None:
    """The first work segment (the open one counted up to `now`) longer than the configured maximum."""
    rows = conn.query("SELECT startedAt, endedAt FROM taskSegments WHERE taskId = ? ORDER BY startedAt, seq",
                      (task_id,))
    for index, seg in enumerate(rows, start=1):
        end = seg["endedAt"] if seg["endedAt"] is not None else now
        minutes = (end - seg["startedAt"]) / 60_000
        if minutes > max_minutes:
            state = "closed" if seg["endedAt"] is not None else "still open"
            return Failure(
                "workSegments",
                f"work segment #{index} of task {task_id} ({state}, started at {seg['startedAt']} ms, "
                f"{minutes:.0f} min) is longer than the {max_minutes}-minute maximum: the clock likely ran "
                "through an unrecorded pause. Record the real time with update_task "
                "{status: 'done', actualMinutes, completionNote}, and use pause_task/resume_task next time",
                {"tool": "update_task", "taskId": task_id, "status": "done", "actualMinutes": 60,
                 "completionNote": "..."},
                "INVALID_STATE",
            )
    return None


def create_failures(conn: Connection, payload: Mapping[str, Any]) -> list[Failure]:
    chk = Checker(payload)
    check_fields(chk, creating=True)
    status = payload.get("status")
    if status is not None and status not in OPEN_STATUSES:
        hint = ("cancel with update_task" if status == "cancelled" else
                "create it, then complete_task" if status == "done" else f"one of {', '.join(OPEN_STATUSES)}")
        chk.fail("status", f"a new task's status must be one of {', '.join(OPEN_STATUSES)} ({hint})",
                 {"status": "todo"})
    check_references(conn, chk)
    return chk.failures


def completion_failures(conn: Connection, task: Mapping[str, Any], note: Any, *, caller: str | None,
                        now: int, max_minutes: int, measured: bool = True) -> list[Failure]:
    """Everything that stops `task` from becoming done with `note` (complete_task and update_task)."""
    chk = Checker({"completionNote": note})
    if task["status"] == "done":
        chk.fail("taskId", f"task {task['id']} is already done", {"taskId": task["id"]}, "INVALID_STATE")
    elif task["status"] == "cancelled":
        chk.fail("taskId", f"task {task['id']} is cancelled; a cancelled task is never done",
                 {"tool": "create_task"}, "INVALID_STATE")
    chk.text("completionNote", required=True, max_bytes=NOTE_MAX_BYTES,
             example="What was done, with proof (commit SHA, PR, test counts)")
    denial = rbac_denial(caller, task, "complete")
    if denial:
        chk.fail("callerOrchestrator", denial, {"callerOrchestrator": task["assignedTo"]}, "RBAC_DENIED")
    if measured:
        seg = long_segment(conn, task_id=task["id"], now=now, max_minutes=max_minutes)
        if seg:
            chk.failures.append(seg)
    return chk.failures


def update_failures(conn: Connection, task: Mapping[str, Any], payload: Mapping[str, Any], *,
                    now: int, max_minutes: int) -> list[Failure]:
    chk = Checker(payload)
    check_fields(chk, creating=False)
    caller = payload.get("callerOrchestrator")
    caller = caller if isinstance(caller, str) else None
    status = payload.get("status")
    chk.enum("status", TASK_STATUSES, example="in_progress")
    if status in TASK_STATUSES and status != task["status"]:
        if task["status"] == "done":
            verb = "cancelled" if status == "cancelled" else f"moved to {status}"
            chk.fail("status", f"task {task['id']} is done and cannot be {verb}; create a follow-up task instead",
                     {"tool": "create_task"}, "INVALID_STATE")
        elif task["status"] == "cancelled":
            chk.fail("status", f"task {task['id']} is cancelled, which is terminal; create a new task instead",
                     {"tool": "create_task"}, "INVALID_STATE")
        elif status == "cancelled":
            if not isinstance(payload.get("cancelReason"), str) or not payload["cancelReason"].strip():
                chk.fail("cancelReason", "cancelReason is required to cancel a task",
                         {"status": "cancelled", "cancelReason": "why it is cancelled"})
            if caller is None:
                chk.fail("callerOrchestrator", "callerOrchestrator is required to cancel: only the task's "
                         f"creator ({task['createdBy']}) may cancel it", {"callerOrchestrator": task["createdBy"]})
            elif caller != SYSTEM and caller not in parties.names("task", task, "force"):
                chk.fail("callerOrchestrator", f"only the creator ({task['createdBy']}) may cancel task "
                         f"{task['id']}", {"callerOrchestrator": task["createdBy"]}, "RBAC_DENIED")
        elif status == "in_progress" and caller not in (None, SYSTEM):
            # The start_task rule (spec 6): a caller runs one task at a time.
            other = segments.running_task_of(conn, orchestrator=caller, other_than=task["id"])
            if other is not None:
                chk.fail("status", f"{caller} already has another task in progress with an open work segment: "
                         f"{other['id']} ({other['title']!r}); pause_task or complete_task it first",
                         {"tool": "pause_task", "taskId": other["id"]}, "INVALID_STATE")
        elif status == "done":
            note = payload.get("completionNote") or task.get("completionNote")
            explicit = payload.get("actualMinutes") is not None
            chk.failures.extend(completion_failures(conn, task, note, caller=None, now=now,
                                                    max_minutes=max_minutes, measured=not explicit))
    if payload.get("cancelReason") is not None and status != "cancelled" and task["status"] != "cancelled":
        chk.fail("cancelReason", "cancelReason is only used together with status='cancelled'",
                 {"status": "cancelled", "cancelReason": payload.get("cancelReason")})
    denial = rbac_denial(caller, task, "update")
    if denial:
        chk.fail("callerOrchestrator", denial, {"callerOrchestrator": task["assignedTo"]}, "RBAC_DENIED")
    check_references(conn, chk, task_id=task["id"])
    return chk.failures


def load_task(conn: Connection, task_id: Any) -> dict[str, Any] | None:
    if not isinstance(task_id, str) or not task_id:
        return None
    row = conn.one("SELECT * FROM tasks WHERE id = ?", (task_id,))
    if row is not None:
        row["dependsOn"] = loads(row["dependsOn"]) or []
    return row
