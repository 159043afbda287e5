"""Task enums, status aliases, the auto-generated-task predicate and the RBAC rule (plain data and
small functions, no SQL writes). The words tasks share with missions (priorities, how a status
filter reads) live below, in missions/vocabulary.py, and are named here too."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ...core import parties
from ...core.rbac import SYSTEM, require_record
from ..missions.vocabulary import PRIORITIES as PRIORITIES
from ..missions.vocabulary import resolve_status_filter as resolve_status_filter
from ..missions.vocabulary import status_sql as status_sql

TASK_STATUSES = ("todo", "in_progress", "review", "blocked", "done", "cancelled")
OPEN_STATUSES = ("todo", "in_progress", "review", "blocked")
TASK_ALIASES: dict[str, tuple[str, ...] | None] = {
    "open": OPEN_STATUSES,
    "active": ("todo", "in_progress"),
    "all": None,
}
TERMINAL_TASK = ("done", "cancelled")

TASK_LITE = ("_id", "_creationTime", "title", "status", "priority", "assignedTo", "missionId")

# The shared "auto-generated" contract (spec 27.7): createdBy /^cron-/i OR title /^\/?check-messages$/i.
_CRON_CREATOR = re.compile(r"^cron-", re.IGNORECASE)
_CHECK_MESSAGES = re.compile(r"^/?check-messages\Z", re.IGNORECASE)
# The same predicate in SQL. lower() is ASCII-only, like the /i flag on these ASCII patterns; LIKE
# is ASCII case-insensitive and 'cron-%' holds no `_` wildcard.
AUTO_GENERATED_SQL = "(createdBy LIKE 'cron-%' OR lower(title) IN ('check-messages', '/check-messages'))"


def is_auto_generated(created_by: str | None, title: str | None) -> bool:
    return bool(_CRON_CREATOR.match(created_by or "") or _CHECK_MESSAGES.match(title or ""))


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
