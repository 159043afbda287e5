"""The seam between task completion and GitHub issues.

Completing a task whose title holds `#NNN` links it to issue NNN of the repo mapped to the task's
project. The GitHub domain (issues, repo mappings) is not part of this package: it plugs in per App
with `app.on_task_done(...)` from its own `register(app)`, calling `link_issues_on_completion` with
its linker; the task lifecycle runs `app.task_done` (passed as `on_done`). Without that hook, or
when no mapping table / mapping row exists, completion does nothing here (no fake links).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ...db import Connection
from ...db.introspect import table_columns

# fn(conn, task, issue_numbers, mapping_row) runs inside the completing transaction.
IssueLinker = Callable[[Connection, dict[str, Any], list[int], dict[str, Any]], None]
# fn(conn, done_task): what the lifecycle calls when a task becomes done (an App passes `app.task_done`).
TaskDone = Callable[[Connection, dict[str, Any]], None]

ISSUE_REF = re.compile(r"#(\d{1,9})\b")
MAPPING_TABLE = "githubRepoMapping"  # spec 1.18


def issue_numbers(title: str) -> list[int]:
    return list(dict.fromkeys(int(n) for n in ISSUE_REF.findall(title or "")))


def repo_mapping_for(conn: Connection, project: str | None) -> dict[str, Any] | None:
    """The active repo mapping of `project`, when the GitHub domain's mapping table exists."""
    if not project:
        return None
    columns = table_columns(conn, MAPPING_TABLE)
    if "project" not in columns:
        return None
    active = " AND coalesce(active, 1) != 0" if "active" in columns else ""
    return conn.one(f"SELECT * FROM {MAPPING_TABLE} WHERE project = ?{active} LIMIT 1", (project,))


def link_issues_on_completion(conn: Connection, task: dict[str, Any], linker: IssueLinker) -> None:
    """Hand a done task's `#NNN` title references and its project's repo mapping to `linker`.

    Registered per App by the GitHub domain through `app.on_task_done` (no module registry).
    """
    numbers = issue_numbers(task.get("title") or "")
    if not numbers:
        return
    mapping = repo_mapping_for(conn, task.get("project"))
    if mapping is None:
        return
    linker(conn, task, numbers, mapping)
