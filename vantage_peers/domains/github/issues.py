"""Issues (spec §16): the row per (repo, issueNumber), its lifecycle, task/commit/pattern links, counts.

Lifecycle `open → in_progress → fixed → verified → closed`. Every move is one conditional UPDATE
(`WHERE status IN (allowed predecessors)`), so two agents racing on one issue cannot both win a
move the other made illegal.
"""

from __future__ import annotations

import re
from typing import Any

from ...core.envelope import fit_envelope
from ...core.errors import InvalidState, NotFound
from ...core.ids import new_id, now_ms
from ...db import Connection, Row, dumps
from ...db.paging import clamp_limit, decode_cursor, encode_cursor, project, to_doc
from .common import ISSUE_STATUSES

ISSUE_LITE = ("_id", "_creationTime", "repo", "issueNumber", "title", "status", "project")
JSON_COLS = ("labels", "linkedTaskIds", "commitShas", "linkedPatternIds")

# Allowed next states. Closing is always possible (won't fix, duplicate: GitHub closes at any time);
# reopening goes back to open; a fix that did not hold goes back to in_progress.
NEXT: dict[str, tuple[str, ...]] = {
    "open": ("in_progress", "fixed", "closed"),
    "in_progress": ("fixed", "open", "closed"),
    "fixed": ("verified", "in_progress", "closed"),
    "verified": ("closed", "in_progress"),
    "closed": ("open",),
}
SHA = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
PR_LINK = re.compile(r"https://github\.com/[A-Za-z0-9-]{1,39}/[A-Za-z0-9._-]{1,100}/pull/\d{1,9}\b")
FIX_WORD = re.compile(r"\bfix(?:ed|es)?\b", re.IGNORECASE)
MAX_LINKS = 200


def issue_doc(row: Row) -> dict[str, Any]:
    return to_doc(row, json_cols=JSON_COLS, bool_cols=("mapped",))


def load(conn: Connection, repo: str, number: int) -> Row | None:
    return conn.one("SELECT * FROM issues WHERE repo = ? COLLATE NOCASE AND issueNumber = ?", (repo, number))


def require(conn: Connection, repo: str, number: int) -> Row:
    row = load(conn, repo, number)
    if row is None:
        raise NotFound(f"issue {repo}#{number} is not tracked; issues arrive through the GitHub webhook "
                       "(POST /github/webhook) or a completed task titled with #NNN in a mapped project")
    return row


def get(conn: Connection, *, repo: str, number: int) -> dict[str, Any] | None:
    row = load(conn, repo, number)
    return issue_doc(row) if row else None


def ensure(conn: Connection, *, repo: str, number: int, mapping: Row | None, now: int,
           fields: dict[str, Any] | None = None) -> tuple[Row, bool]:
    """The issue row, created when missing; `fields` (title, labels …) overwrite what GitHub sent.

    Returns (row, created). Mapping columns are filled when the repo is mapped and the row has none.
    """
    fields = {k: v for k, v in (fields or {}).items() if v is not None}
    created = conn.one(
        "INSERT INTO issues (id, repo, issueNumber, project, orchestrator, mapped, createdAt, updatedAt) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (repo, issueNumber) DO NOTHING RETURNING id",
        (new_id("iss"), repo, number, mapping["project"] if mapping else None,
         mapping["orchestrator"] if mapping else None, 1 if mapping else 0, now, now),
    )
    if created is None and mapping is not None:
        conn.execute("UPDATE issues SET project = coalesce(project, ?), orchestrator = coalesce(orchestrator, ?), "
                     "mapped = 1 WHERE repo = ? COLLATE NOCASE AND issueNumber = ?",
                     (mapping["project"], mapping["orchestrator"], repo, number))
    if fields:
        sets = ", ".join(f"{k} = ?" for k in fields)
        values = [dumps(v) if k in JSON_COLS else v for k, v in fields.items()]
        conn.execute(f"UPDATE issues SET {sets}, updatedAt = ? WHERE repo = ? COLLATE NOCASE AND issueNumber = ?",
                     [*values, now, repo, number])
    row = load(conn, repo, number)
    assert row is not None
    return row, created is not None


def set_status(conn: Connection, *, repo: str, number: int, status: str, who: str | None = None,
               now: int | None = None) -> dict[str, Any]:
    """A lifecycle move; the same status again is a no-op, an illegal move names the allowed ones."""
    now = now or now_ms()
    row = require(conn, repo, number)
    if row["status"] == status:
        return issue_doc(row)
    sources = [s for s, targets in NEXT.items() if status in targets]
    marks = ",".join("?" for _ in sources)
    extra = {"fixed": ", fixedAt = ?1, fixedBy = coalesce(?2, fixedBy)",
             "verified": ", verifiedAt = ?1, verifiedBy = coalesce(?2, verifiedBy)",
             "closed": ", closedAt = ?1", "open": ", closedAt = NULL"}.get(status, "")
    changed = conn.one(
        f"UPDATE issues SET status = ?3, updatedAt = ?1{extra} WHERE id = ?4 AND status IN ({marks}) RETURNING *",
        [now, who, status, row["id"], *sources],
    ) if sources else None
    if changed is None:
        current = require(conn, repo, number)
        allowed = ", ".join(NEXT[current["status"]])
        raise InvalidState(f"issue {repo}#{number} is {current['status']}; it cannot move to {status}. "
                           f"Allowed next: {allowed} (lifecycle open → in_progress → fixed → verified → closed)")
    return issue_doc(changed)


def _append(conn: Connection, issue_id: str, column: str, values: list[str], now: int) -> int:
    """Append each value to a JSON list column once (in SQL, so concurrent appends never drop one)."""
    added = 0
    for value in values:
        added += conn.execute(
            f"UPDATE issues SET {column} = json_insert(coalesce({column}, '[]'), '$[#]', CAST(? AS TEXT)), updatedAt = ? "
            f"WHERE id = ? AND NOT EXISTS (SELECT 1 FROM json_each(coalesce(issues.{column}, '[]')) "
            f"WHERE value = ?) AND json_array_length(coalesce({column}, '[]')) < ?",
            (value, now, issue_id, value, MAX_LINKS),
        )
    return added


def link_commit(conn: Connection, *, repo: str, number: int, sha: str, fixed_by: str | None,
                now: int | None = None) -> dict[str, Any]:
    """Record the SHA; an open or in-progress issue moves to fixed (later states keep theirs)."""
    now = now or now_ms()
    row = require(conn, repo, number)
    _append(conn, row["id"], "commitShas", [sha], now)
    # Moving to fixed records who fixed it; on an issue already past that, fixedBy is only filled if empty.
    moved = conn.execute("UPDATE issues SET status = 'fixed', fixedAt = ?, fixedBy = coalesce(?, fixedBy), "
                         "updatedAt = ? WHERE id = ? AND status IN ('open', 'in_progress')",
                         (now, fixed_by, now, row["id"]))
    if fixed_by and not moved:
        conn.execute("UPDATE issues SET fixedBy = coalesce(fixedBy, ?) WHERE id = ?", (fixed_by, row["id"]))
    return issue_doc(require(conn, repo, number))


def verify(conn: Connection, *, repo: str, number: int, verified_by: str, now: int | None = None) -> dict[str, Any]:
    row = require(conn, repo, number)
    if row["status"] == "verified":
        return issue_doc(row)
    if row["status"] != "fixed":
        raise InvalidState(f"issue {repo}#{number} is {row['status']}; only a fixed issue can be verified "
                           "(link_commit_to_issue or update_issue_status to fixed first)")
    return set_status(conn, repo=repo, number=number, status="verified", who=verified_by, now=now)


def link_task(conn: Connection, *, issue: Row, task: dict[str, Any], now: int) -> None:
    """The complete_task side (§6 rule 3): link the task, take SHAs from the note, maybe move to fixed."""
    note = task.get("completionNote") or ""
    shas = list(dict.fromkeys(SHA.findall(note)))
    _append(conn, issue["id"], "linkedTaskIds", [task["id"]], now)
    if shas:
        _append(conn, issue["id"], "commitShas", shas, now)
    pr = PR_LINK.search(note)
    if pr:  # e.g. repo-fix-v1 "Create PR + Comment Issue": the PR monitor follows it from now on
        conn.execute("UPDATE issues SET prUrl = ?, prStatus = 'open', updatedAt = ? WHERE id = ? AND prUrl IS NULL",
                     (pr.group(0), now, issue["id"]))
    if shas or FIX_WORD.search(note):
        conn.execute("UPDATE issues SET status = 'fixed', fixedAt = ?, fixedBy = coalesce(fixedBy, ?), updatedAt = ? "
                     "WHERE id = ? AND status IN ('open', 'in_progress')",
                     (now, task.get("assignedTo"), now, issue["id"]))


def parse_issue_ref(ref: str) -> tuple[str, int] | None:
    """`owner/repo#282` -> (repo, 282); anything else None."""
    m = re.fullmatch(r"\s*([^#\s]+/[^#\s]+)#(\d{1,9})\s*", ref or "")
    return (m.group(1), int(m.group(2))) if m else None


def link_pattern(conn: Connection, pattern_id: str, issue_ref: str, now: int) -> None:
    """link_issue_to_pattern's issue side: an `owner/repo#N` or `iss_…` id known here records the pattern."""
    parsed = parse_issue_ref(issue_ref)
    if parsed is not None:
        row = load(conn, *parsed)
    else:
        row = conn.one("SELECT * FROM issues WHERE id = ?", (issue_ref.strip(),))
    if row is not None:
        _append(conn, row["id"], "linkedPatternIds", [pattern_id], now)


def list_issues(conn: Connection, *, project_name: str | None, status: str | None, limit: int | None,
                cursor: str | None, fields: str | None) -> dict[str, Any]:
    """`{count, issues, nextCursor?}` (spec §16): newest first; `count` = rows on this page."""
    from ...db.paging import check_fields

    fields = check_fields(fields)
    size = clamp_limit(limit)
    where, params = [], []
    if project_name is not None:
        where.append("project = ?")
        params.append(project_name)
    if status is not None:
        where.append("status = ?")
        params.append(status)
    anchor = decode_cursor(cursor)
    if anchor is not None:
        value, last_id = anchor
        if last_id is None:
            where.append("createdAt < ?")
            params.append(value)
        else:
            where.append("(createdAt < ? OR (createdAt = ? AND id < ?))")
            params.extend([value, value, last_id])
    sql = "SELECT * FROM issues" + (" WHERE " + " AND ".join(where) if where else "")
    rows = conn.query(sql + " ORDER BY createdAt DESC, id DESC LIMIT ?", [*params, size + 1])
    more = len(rows) > size
    rows = rows[:size]
    items = [project(issue_doc(r), fields, ISSUE_LITE) for r in rows]
    fit = fit_envelope(items, extra={"count": 0}, key="issues")
    out: dict[str, Any] = {"count": fit, "issues": items[:fit]}
    if fit < len(items) or more:
        last = rows[fit - 1]
        out["nextCursor"] = encode_cursor(last["createdAt"], last["id"])
    return out


def counts(conn: Connection, *, project_name: str | None) -> dict[str, Any]:
    """`{open, in_progress, fixed, verified, closed}` (spec §16), plus `total`; per project when none is given."""
    where, params = ("WHERE project = ?", [project_name]) if project_name is not None else ("", [])
    out: dict[str, Any] = dict.fromkeys(ISSUE_STATUSES, 0)
    for r in conn.query(f"SELECT status, count(*) AS n FROM issues {where} GROUP BY status", params):
        out[r["status"]] = r["n"]
    out["total"] = sum(out[s] for s in ISSUE_STATUSES)
    if project_name is None:
        per: dict[str, dict[str, int]] = {}
        for r in conn.query("SELECT coalesce(project, '') AS p, status, count(*) AS n FROM issues "
                            "GROUP BY p, status"):
            per.setdefault(r["p"] or "(unmapped)", dict.fromkeys(ISSUE_STATUSES, 0))[r["status"]] = r["n"]
        out["byProject"] = per
    return out

