"""What a person can do from the dashboard, each through the domain store the tools use.

Every action runs in one `BEGIN IMMEDIATE` transaction that makes the change with the store
function and writes a `humanActions` row (who, how they signed in, what, on which record). The
operator is the team's overseer (loopback user, master, or an OAuth client allowed to act as
`human:<name>`, scope.py), so record ownership rules are applied as for `system` — the rule the tools
apply to the master — on the records the operator may read (`readers`: another task is NOT_FOUND,
as on its page), while every state rule (a done task cannot be cancelled, a cancel needs a reason,
…) applies unchanged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.errors import InvalidArgument, InvalidState, NotFound
from ..core.ids import new_id, now_ms
from ..db import Connection, Database
from ..domains.messaging import store as messaging
from ..domains.recurring import store as recurring
from ..domains.tasks import lifecycle
from ..domains.tasks import store as tasks
from ..domains.tasks.rules import SYSTEM, TERMINAL_TASK

HUMAN_PREFIX = "human:"
MAX_NAME_CHARS = 64
MAX_CONTENT_BYTES = 1_000_000
MAX_REASON_BYTES = 2_000
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._@-]*$")
_TARGET = re.compile(r"^[^\x00-\x1f]{1,500}$")  # a role, a comma list, an instance id or broadcast


@dataclass(frozen=True)
class Operator:
    """The person at the dashboard: shown to agents as `human:<name>`."""

    name: str
    via: str  # loopback, master, or the OAuth client id they signed in with
    readers: tuple[str, ...] | None = None  # whose tasks they may read (policy.readers_of; None: every one)

    @property
    def actor(self) -> str:
        return HUMAN_PREFIX + self.name


def check_name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument("name is required: the name agents will see as human:<name>")
    name = value.strip()
    if len(name) > MAX_NAME_CHARS or not _NAME.match(name):
        raise InvalidArgument(f"name must be 1-{MAX_NAME_CHARS} letters, digits, spaces or . _ @ - "
                              "(it is shown to agents as human:<name>)")
    return name


def _text(value: Any, field: str, max_bytes: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{field} is required")
    if len(value.encode("utf-8", "surrogatepass")) > max_bytes:
        raise InvalidArgument(f"{field} is longer than {max_bytes} bytes")
    return value


def _audit(conn: Connection, op: Operator, action: str, kind: str, target: str, detail: dict[str, Any],
           now: int) -> None:
    conn.execute("INSERT INTO humanActions (id, actor, via, action, targetKind, targetId, detail, createdAt) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                 (new_id("hac"), op.actor, op.via, action, kind, target, json.dumps(detail), now))


def send_message(db: Database, op: Operator, *, channel: Any, content: Any) -> dict[str, Any]:
    """Send as `human:<name>` with `messaging.store.send_message`, receipts and all."""
    if not isinstance(channel, str) or not _TARGET.match(channel.strip()):
        raise InvalidArgument("to must be a role, a comma list of roles, an instance id or broadcast")
    text = _text(content, "message", MAX_CONTENT_BYTES)
    channel = channel.strip()
    now = now_ms()

    def run(c: Connection) -> dict[str, Any]:
        sent = messaging.send_message(c, sender=op.actor, channel=channel, content=text)
        _audit(c, op, "send_message", "message", sent["messageId"], {"channel": channel}, now)
        return sent

    return db.write(run)


Check = Callable[[dict[str, Any]], dict[str, Any]]


def _task_update(db: Database, op: Operator, action: str, task_id: str, payload: dict[str, Any],
                 settings: Any, check: Check | None = None) -> None:
    """update_task as `system`, after `check` (given the task as read inside the same transaction,
    returns the audit detail) — so a state the check relied on cannot change before the update."""
    now = now_ms()

    def run(c: Connection) -> None:
        if not tasks.can_read(c, task_id, op.readers):
            raise NotFound(f"task {task_id} does not exist")
        task = tasks.require_task(c, task_id)
        detail = check(task) if check else {k: v for k, v in payload.items()}
        lifecycle.update_task(c, task_id=task_id, payload={**payload, "callerOrchestrator": SYSTEM}, now=now,
                              max_minutes=settings.max_segment_minutes)
        _audit(c, op, action, "task", task_id, detail, now)

    db.write(run)


def reassign_task(db: Database, op: Operator, settings: Any, *, task_id: str, assignee: Any) -> None:
    who = _text(assignee, "assignee", 200).strip()
    if not _TARGET.match(who) or "," in who:
        raise InvalidArgument("assignee must be one orchestrator id, without control characters or commas")

    def check(task: dict[str, Any]) -> dict[str, Any]:
        if task["status"] in TERMINAL_TASK:
            raise InvalidState(f"task {task_id} is {task['status']}; a finished task is not reassigned")
        return {"from": task["assignedTo"], "to": who}

    _task_update(db, op, "reassign_task", task_id, {"assignedTo": who}, settings, check)


def unblock_task(db: Database, op: Operator, settings: Any, *, task_id: str) -> None:
    """A blocked task back to todo (its blocker cleared), as update_task status='todo' does."""
    def check(task: dict[str, Any]) -> dict[str, Any]:
        if task["status"] != "blocked":
            raise InvalidState(f"task {task_id} is {task['status']}, not blocked: nothing to unblock")
        return {"was": task.get("blockedBy")}

    _task_update(db, op, "unblock_task", task_id, {"status": "todo"}, settings, check)


def cancel_task(db: Database, op: Operator, settings: Any, *, task_id: str, reason: Any) -> None:
    why = _text(reason, "reason", MAX_REASON_BYTES)

    def check(task: dict[str, Any]) -> dict[str, Any]:
        if task["status"] in TERMINAL_TASK:  # update_task would only rewrite a cancelled task's reason
            raise InvalidState(f"task {task_id} is {task['status']}, which is terminal: nothing to cancel")
        return {"reason": why}

    _task_update(db, op, "cancel_task", task_id, {"status": "cancelled", "cancelReason": why}, settings, check)


def release_claim(db: Database, op: Operator, settings: Any, *, task_id: str) -> None:
    """Put an in-progress task back to todo (its work segment closes), so anyone may check it out."""
    def check(task: dict[str, Any]) -> dict[str, Any]:
        if task["status"] != "in_progress":
            raise InvalidState(f"task {task_id} is {task['status']}, not in_progress: it holds no claim to release")
        return {"heldBy": task["assignedTo"]}

    _task_update(db, op, "release_claim", task_id, {"status": "todo"}, settings, check)


def pause_recurring(db: Database, op: Operator, *, template_id: str) -> None:
    now = now_ms()

    def run(c: Connection) -> None:
        row = recurring.require(c, template_id)
        if row["paused"]:
            raise InvalidState(f"recurring task {template_id} is already paused")
        recurring.pause(c, template_id=template_id, caller=SYSTEM, now=now)
        _audit(c, op, "pause_recurring", "recurring", template_id, {"title": row["title"]}, now)

    db.write(run)


def resume_recurring(db: Database, op: Operator, *, template_id: str) -> None:
    now = now_ms()

    def run(c: Connection) -> None:
        row = recurring.require(c, template_id)
        if not row["paused"]:
            raise InvalidState(f"recurring task {template_id} is not paused")
        recurring.resume(c, template_id=template_id, caller=SYSTEM, now=now)
        _audit(c, op, "resume_recurring", "recurring", template_id, {"title": row["title"]}, now)

    db.write(run)
