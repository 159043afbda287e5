"""The seam between task completion and GitHub issues.

Completing a task whose title holds `#NNN` links it to issue NNN of the repo mapped to the task's
project. The GitHub domain (issues, repo mappings) is not part of this package: it plugs in by
calling `register_issue_linker(fn)` from its own `register(app)`. Until one is registered, or when
no mapping table / mapping row exists, completion does nothing here (no fake links).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ...db import Connection

# fn(conn, task, issue_numbers, mapping_row) runs inside the completing transaction.
IssueLinker = Callable[[Connection, dict[str, Any], list[int], dict[str, Any]], None]
_linkers: list[IssueLinker] = []

ISSUE_REF = re.compile(r"#(\d{1,9})\b")
MAPPING_TABLE = "githubRepoMapping"  # spec 1.18


def register_issue_linker(fn: IssueLinker) -> None:
    if fn not in _linkers:
        _linkers.append(fn)


def issue_numbers(title: str) -> list[int]:
    return list(dict.fromkeys(int(n) for n in ISSUE_REF.findall(title or "")))


def repo_mapping_for(conn: Connection, project: str | None) -> dict[str, Any] | None:
    """The active repo mapping of `project`, when the GitHub domain's mapping table exists."""
    if not project:
        return None
    columns = {r["name"] for r in conn.query(f"SELECT name FROM pragma_table_info('{MAPPING_TABLE}')")}
    if "project" not in columns:
        return None
    active = " AND coalesce(active, 1) != 0" if "active" in columns else ""
    return conn.one(f"SELECT * FROM {MAPPING_TABLE} WHERE project = ?{active} LIMIT 1", (project,))


def link_issues_on_completion(conn: Connection, task: dict[str, Any]) -> None:
    numbers = issue_numbers(task.get("title") or "")
    if not numbers:
        return
    mapping = repo_mapping_for(conn, task.get("project"))
    if mapping is None:
        return
    for fn in list(_linkers):
        fn(conn, task, numbers, mapping)
