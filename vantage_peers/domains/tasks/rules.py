"""Enums, status aliases, the auto-generated-task predicate and the RBAC rule, shared by tasks,
missions and templates (plain data and small functions, no SQL writes)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ...core import parties
from ...core.errors import InvalidArgument
from ...core.rbac import SYSTEM, require_record

PRIORITIES = ("urgent", "high", "medium", "low")
TASK_STATUSES = ("todo", "in_progress", "review", "blocked", "done", "cancelled")
OPEN_STATUSES = ("todo", "in_progress", "review", "blocked")
TASK_ALIASES: dict[str, tuple[str, ...] | None] = {
    "open": OPEN_STATUSES,
    "active": ("todo", "in_progress"),
    "all": None,
}
MISSION_STATUSES = ("brainstorm", "plan", "execute", "validate", "complete", "cancelled")
MISSION_ALIASES: dict[str, tuple[str, ...] | None] = {
    "open": ("brainstorm", "plan", "execute", "validate"),
    "active": ("plan", "execute"),
    "all": None,
}
TERMINAL_TASK = ("done", "cancelled")

TASK_LITE = ("_id", "_creationTime", "title", "status", "priority", "assignedTo", "missionId")
MISSION_LITE = ("_id", "_creationTime", "name", "status", "pilot", "priority", "project")

# The shared "auto-generated" contract (spec 27.7): createdBy /^cron-/i OR title /^\/?check-messages$/i.
_CRON_CREATOR = re.compile(r"^cron-", re.IGNORECASE)
_CHECK_MESSAGES = re.compile(r"^/?check-messages\Z", re.IGNORECASE)
# The same predicate in SQL. lower() is ASCII-only, like the /i flag on these ASCII patterns; LIKE
# is ASCII case-insensitive and 'cron-%' holds no `_` wildcard.
AUTO_GENERATED_SQL = "(createdBy LIKE 'cron-%' OR lower(title) IN ('check-messages', '/check-messages'))"


def is_auto_generated(created_by: str | None, title: str | None) -> bool:
    return bool(_CRON_CREATOR.match(created_by or "") or _CHECK_MESSAGES.match(title or ""))


def resolve_status_filter(
    value: str | Sequence[str] | None,
    *,
    statuses: Sequence[str],
    aliases: Mapping[str, tuple[str, ...] | None],
    field: str = "status",
) -> tuple[str, ...] | None:
    """A status filter (value, array, or alias) as the tuple of statuses to keep; None = no filter."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else list(value)
    if not items:
        raise InvalidArgument(f"{field} must not be an empty array; omit it or pass 'all' for every status")
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise InvalidArgument(f"{field} values must be strings")
        key = item.strip()
        if key in aliases:
            expanded = aliases[key]
            if expanded is None:
                return None
            out.extend(expanded)
        elif key in statuses:
            out.append(key)
        else:
            allowed = ", ".join([*statuses, *aliases])
            raise InvalidArgument(f"{field} {item!r} is not a status or alias; use one of: {allowed}")
    return tuple(dict.fromkeys(out))


def status_sql(column: str, keep: tuple[str, ...]) -> str:
    """`column IN ('a', 'b')` with literal values (all from a fixed enum), so that SQLite can use the
    partial index written with the same literal list."""
    assert all(s.replace("_", "").isalpha() for s in keep)
    return f"{column} IN ({', '.join(repr(s) for s in keep)})"


def rbac_denial(caller: str | None, task: Mapping[str, Any], action: str) -> str | None:
    """Why `caller` may not `action` this task (creator or assignee; system bypasses), or None."""
    if caller is None or caller == SYSTEM or caller in parties.names("task", task, "change"):
        return None
    return (
        f"{caller} may not {action} task {task['id']}: only its creator ({task['createdBy']}), its "
        f"assignee ({task['assignedTo']}) or system may"
    )


def authorize(caller: str | None, task: Mapping[str, Any], action: str) -> None:
    require_record(caller, "task", task, "change", action=action, what=f"task {task['id']}")
