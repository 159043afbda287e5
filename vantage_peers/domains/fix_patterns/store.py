"""Fix patterns and their attempts: SQL only, keyword-only functions, one transaction per call.

Races are decided inside SQL: the automatic `validatedFix` of a worked attempt is a conditional
column update (`CASE WHEN validatedFix IS NULL`) in the same statement that counts the attempt,
and an issue link is appended only when absent (`NOT EXISTS … json_each`), so concurrent writers
from several processes never overwrite a validated fix or duplicate a link.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...core.envelope import fit_envelope
from ...core.errors import InvalidArgument, NotFound
from ...core.ids import new_id, now_ms
from ...db import Connection, Row, dumps, loads
from ...db.paging import equals, keyset_page, to_doc

SEVERITIES = ("critical", "major", "minor")
JSON_COLS = ("files", "tags", "stack", "linkedIssueIds")
LITE_KEYS = ("_id", "_creationTime", "symptom", "severity", "sourceProject", "validated")
MAX_ATTEMPTS_SHOWN = 200  # get_fix_pattern returns at most this many (the newest), oldest first
MAX_LINKED_ISSUES = 1_000


def pattern_doc(row: Row) -> dict[str, Any]:
    """A pattern as agents see it; `validated` says whether `validatedFix` is set."""
    doc = to_doc(row, json_cols=JSON_COLS)
    doc["validated"] = row.get("validatedFix") is not None
    return doc


def attempt_doc(row: Row) -> dict[str, Any]:
    return to_doc(row, bool_cols=("worked",))


def _require(conn: Connection, pattern_id: str) -> Row:
    row = conn.one("SELECT * FROM fixPatterns WHERE id = ?", (pattern_id,))
    if row is None:
        raise NotFound(f"fix pattern {pattern_id} does not exist; find patterns with search_fix_patterns "
                       "or list_fix_patterns")
    return row


# -- writes -------------------------------------------------------------------------------------
def create(
    conn: Connection,
    *,
    symptom: str,
    root_cause: str,
    source_project: str,
    created_by: str,
    tags: list[str] | None = None,
    stack: list[str] | None = None,
    severity: str | None = None,
    files: list[str] | None = None,
    validated_fix: str | None = None,
    now: int | None = None,
) -> dict[str, str]:
    """Insert a pattern; its embedding job is queued by a trigger in this same transaction."""
    if severity is not None and severity not in SEVERITIES:
        raise InvalidArgument(f"severity must be one of {', '.join(SEVERITIES)}, got {severity!r}")
    now = now if now is not None else now_ms()
    pattern_id = new_id("fxp")
    validated = validated_fix is not None
    conn.execute(
        "INSERT INTO fixPatterns (id, symptom, rootCause, validatedFix, validatedBy, validatedAt, files, tags, "
        "stack, sourceProject, severity, createdBy, createdAt, updatedAt) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (pattern_id, symptom, root_cause, validated_fix, created_by if validated else None,
         now if validated else None, dumps(files), dumps(tags or []), dumps(stack or []), source_project,
         severity, created_by, now, now),
    )
    return {"patternId": pattern_id}


def add_attempt(
    conn: Connection,
    *,
    pattern_id: str,
    description: str,
    worked: bool,
    why: str,
    created_by: str,
    commit: str | None = None,
    now: int | None = None,
) -> dict[str, Any]:
    """Record an attempt; a worked one becomes `validatedFix` when the pattern has none yet.

    The attempt row and the pattern update are one transaction; whether this attempt validated
    the pattern is decided by the UPDATE itself (every CASE reads the row's values before it).
    """
    now = now if now is not None else now_ms()
    _require(conn, pattern_id)
    attempt_id = new_id("fxa")
    conn.execute(
        'INSERT INTO fixAttempts (id, patternId, description, "commit", worked, why, createdBy, createdAt) '
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (attempt_id, pattern_id, description, commit, int(worked), why, created_by, now),
    )
    take = "(? = 1 AND validatedFix IS NULL)"
    row = conn.one(
        f"UPDATE fixPatterns SET attemptCount = attemptCount + 1, updatedAt = ?, "
        f"validatedFix = CASE WHEN {take} THEN ? ELSE validatedFix END, "
        f"validatedBy = CASE WHEN {take} THEN ? ELSE validatedBy END, "
        f"validatedAt = CASE WHEN {take} THEN ? ELSE validatedAt END, "
        f"validatedAttemptId = CASE WHEN {take} THEN ? ELSE validatedAttemptId END "
        "WHERE id = ? RETURNING validatedFix, validatedAttemptId",
        (now, int(worked), description, int(worked), created_by, int(worked), now, int(worked), attempt_id,
         pattern_id),
    )
    assert row is not None  # the pattern exists: checked above, in this transaction
    out: dict[str, Any] = {"attemptId": attempt_id, "patternId": pattern_id,
                           "autoValidated": row["validatedAttemptId"] == attempt_id}
    if row["validatedFix"] is not None:
        out["validatedFix"] = row["validatedFix"]
    return out


def validate(conn: Connection, *, pattern_id: str, validated_fix: str, validated_by: str | None,
             now: int | None = None) -> dict[str, Any]:
    """Set `validatedFix` explicitly (replacing any earlier one); returns the updated pattern."""
    now = now if now is not None else now_ms()
    row = conn.one(
        "UPDATE fixPatterns SET validatedFix = ?, validatedBy = ?, validatedAt = ?, validatedAttemptId = NULL, "
        "updatedAt = ? WHERE id = ? RETURNING *",
        (validated_fix, validated_by, now, now, pattern_id),
    )
    if row is None:
        _require(conn, pattern_id)
    return pattern_doc(row)  # type: ignore[arg-type]


# fn(conn, pattern_id, issue_id, now): the GitHub domain records the pattern on the issue row. It sets
# `app.extensions[ISSUE_SIDE]` (per App, #18); link_issue_to_pattern passes it to link_issue.
IssueSide = Callable[[Connection, str, str, int], None]
ISSUE_SIDE = "fix_patterns.issue_side"


def link_issue(conn: Connection, *, pattern_id: str, issue_id: str, now: int | None = None,
               issue_side: IssueSide | None = None) -> dict[str, Any]:
    """Append `issue_id` to the pattern's `linkedIssueIds` unless it is there already (idempotent).

    The issue side (the pattern on the issue row, when that issue is tracked) is recorded by the
    `issue_side` (the GitHub domain's, when this App has it), in the same transaction.
    """
    now = now if now is not None else now_ms()
    row = conn.one(
        "UPDATE fixPatterns SET linkedIssueIds = json_insert(coalesce(linkedIssueIds, '[]'), '$[#]', CAST(? AS TEXT)), "
        "updatedAt = ? WHERE id = ? "
        "AND NOT EXISTS (SELECT 1 FROM json_each(coalesce(fixPatterns.linkedIssueIds, '[]')) WHERE value = ?) "
        "AND json_array_length(coalesce(linkedIssueIds, '[]')) < ? RETURNING linkedIssueIds",
        (issue_id, now, pattern_id, issue_id, MAX_LINKED_ISSUES),
    )
    added = row is not None
    if row is None:
        row = _require(conn, pattern_id)
        if issue_id not in _id_list(row["linkedIssueIds"]):
            raise InvalidArgument(f"fix pattern {pattern_id} already links {MAX_LINKED_ISSUES} issues, the maximum")
    if issue_side is not None:
        issue_side(conn, pattern_id, issue_id, now)
    return {"patternId": pattern_id, "issueId": issue_id, "added": added,
            "linkedIssueIds": _id_list(row["linkedIssueIds"])}


def _id_list(value: str | None) -> list[str]:
    return list(loads(value) or []) if value else []


# -- reads --------------------------------------------------------------------------------------
def get(conn: Connection, *, pattern_id: str, max_attempts: int = MAX_ATTEMPTS_SHOWN) -> dict[str, Any] | None:
    """The pattern with `attempts` (oldest first; the newest `max_attempts`, cut to fit the envelope)."""
    row = conn.one("SELECT * FROM fixPatterns WHERE id = ?", (pattern_id,))
    if row is None:
        return None
    doc = pattern_doc(row)
    newest = [attempt_doc(r) for r in conn.query(
        "SELECT * FROM fixAttempts WHERE patternId = ? ORDER BY createdAt DESC, id DESC LIMIT ?",
        (pattern_id, max_attempts))]
    keep = fit_envelope(newest, extra=doc, key="attempts") if newest else 0
    doc["attempts"] = list(reversed(newest[:keep]))
    if keep < row["attemptCount"]:
        doc["attemptsTruncated"] = True
    return doc


def list_patterns(conn: Connection, *, project: str | None, limit: int | None, cursor: str | None,
                  fields: str | None) -> dict[str, Any]:
    """Newest first, optionally of one `sourceProject`; `{items, nextCursor?}`."""
    where, params = equals((("sourceProject", project),))
    return keyset_page(conn, table="fixPatterns", to_item=pattern_doc, where=where, params=params, limit=limit,
                       cursor=cursor, fields=fields, lite_keys=LITE_KEYS)
