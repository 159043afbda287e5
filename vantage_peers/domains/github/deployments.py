"""Monitored deployments (spec §19) and their deduplicated error logs (spec §20)."""

from __future__ import annotations

import hashlib
from typing import Any

from ...core.errors import NotFound
from ...core.ids import new_id, now_ms
from ...db import Connection, Row
from ...db.paging import equals, keyset_page, to_doc
from . import outbox

DEPLOYMENT_HIDDEN = ("leaseOwner", "leaseUntil")
ERROR_LITE = ("_id", "_creationTime", "deployment", "functionName", "errorMessage", "count", "lastSeen",
              "githubIssueNumber")
POLL_LEASE_MS = 120_000


def deployment_doc(row: Row) -> dict[str, Any]:
    doc = to_doc(row, bool_cols=("active",))
    for key in DEPLOYMENT_HIDDEN:
        doc.pop(key, None)
    return doc


def add(conn: Connection, *, name: str, url: str, key_env: str, github_repo: str, orchestrator: str,
        now: int | None = None) -> dict[str, Any]:
    """Register (or update and reactivate) the deployment called `name`."""
    now = now or now_ms()
    new = new_id("dep")
    row = conn.one(
        "INSERT INTO monitoredDeployments (id, name, deploymentUrl, deployKeyEnvVar, githubRepo, orchestrator, "
        "active, createdAt, updatedAt) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?) ON CONFLICT (name) DO UPDATE SET "
        "deploymentUrl = excluded.deploymentUrl, deployKeyEnvVar = excluded.deployKeyEnvVar, "
        "githubRepo = excluded.githubRepo, orchestrator = excluded.orchestrator, active = 1, "
        "logCursor = CASE WHEN monitoredDeployments.deploymentUrl = excluded.deploymentUrl "
        "THEN monitoredDeployments.logCursor ELSE 0 END, "
        "updatedAt = excluded.updatedAt RETURNING *, (id = ?) AS created",  # an update keeps the old id
        (new, name, url, key_env, github_repo, orchestrator, now, now, new),
    )
    assert row is not None
    created = bool(row.pop("created"))
    return {"deploymentId": row["id"], "created": created, **deployment_doc(row)}


def deactivate(conn: Connection, *, name: str, now: int | None = None) -> dict[str, Any]:
    """remove_deployment: stop monitoring; the row and its error logs are kept."""
    now = now or now_ms()
    row = conn.one("UPDATE monitoredDeployments SET active = 0, updatedAt = ? WHERE name = ? RETURNING *", (now, name))
    if row is None:
        raise NotFound(f"deployment {name!r} is not registered; see add_deployment")
    return deployment_doc(row)


def claim_due(conn: Connection, *, owner: str, now: int, min_interval_ms: int = 0) -> list[Row]:
    """Lease every active deployment nobody is polling and not polled in the last `min_interval_ms`
    (one statement: a deployment is polled by one process at a time)."""
    return conn.query(
        "UPDATE monitoredDeployments SET leaseOwner = ?1, leaseUntil = ?2 + ?3 WHERE active = 1 "
        "AND (leaseUntil IS NULL OR leaseUntil <= ?2) AND (lastPolledAt IS NULL OR lastPolledAt <= ?2 - ?4) "
        "RETURNING *", (owner, now, POLL_LEASE_MS, min_interval_ms))


def release(conn: Connection, *, deployment_id: str, owner: str, now: int, error: str | None) -> None:
    conn.execute("UPDATE monitoredDeployments SET leaseOwner = NULL, leaseUntil = NULL, lastPolledAt = ?, "
                 "lastError = ? WHERE id = ? AND leaseOwner = ?", (now, error, deployment_id, owner))


def error_hash(function_name: str, message: str) -> str:
    return hashlib.sha256(f"{function_name}\n{message}".encode("utf-8", "surrogatepass")).hexdigest()


def record_batch(conn: Connection, *, deployment: Row, owner: str, old_cursor: float, new_cursor: float,
                 errors: list[dict[str, Any]], now: int) -> dict[str, int]:
    """Advance the log cursor and record `errors`, only if this lease still holds and nobody moved the
    cursor (compare-and-set): a batch of logs is counted once even if two processes fetched it."""
    moved = conn.execute(
        "UPDATE monitoredDeployments SET logCursor = ?, lastPolledAt = ?, lastError = NULL, leaseOwner = NULL, "
        "leaseUntil = NULL WHERE id = ? AND leaseOwner = ? AND logCursor = ?",
        (new_cursor, now, deployment["id"], owner, old_cursor),
    )
    if not moved:
        return {"new": 0, "repeats": 0, "skipped": len(errors)}
    new = repeats = 0
    for err in errors:
        digest = error_hash(err["functionName"], err["errorMessage"])
        seen = err.get("seenAt") or now
        row = conn.one(
            "INSERT INTO errorLogs (id, deploymentId, deployment, functionName, errorMessage, hash, count, firstSeen, "
            "lastSeen, stackTrace, udfType, requestId, githubRepo, createdAt, updatedAt) "
            "VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (deploymentId, hash) DO NOTHING "
            "RETURNING *",
            (new_id("err"), deployment["id"], deployment["name"], err["functionName"], err["errorMessage"], digest,
             seen, seen, err.get("stackTrace"), err.get("udfType"), err.get("requestId"), deployment["githubRepo"],
             now, now),
        )
        if row is None:
            repeats += 1
            conn.execute("UPDATE errorLogs SET count = count + 1, lastSeen = max(lastSeen, ?), "
                         "stackTrace = coalesce(?, stackTrace), updatedAt = ? WHERE deploymentId = ? AND hash = ?",
                         (seen, err.get("stackTrace"), now, deployment["id"], digest))
            continue
        new += 1
        queue_auto_issue(conn, error=row, deployment=deployment, now=now)
    return {"new": new, "repeats": repeats, "skipped": 0}


def queue_auto_issue(conn: Connection, *, error: Row, deployment: Row, now: int) -> str | None:
    """One `[Auto]` issue per error row (dedup key), labels bug + auto-detected, stack trace in the body."""
    title = f"[Auto] {error['functionName']}: {error['errorMessage']}"
    title = title if len(title) <= 250 else title[:247] + "..."
    stack = (error["stackTrace"] or error["errorMessage"])[:60_000].replace("```", "``\u200b`")
    body = (f"Detected by vantage-peers error monitoring on deployment `{deployment['name']}` "
            f"({deployment['deploymentUrl']}).\n\n- Function: `{error['functionName']}`\n"
            f"- Error: {error['errorMessage']}\n- Orchestrator: {deployment['orchestrator']}\n"
            f"- Dedup hash: `{error['hash']}`\n\n### Stack trace\n\n```\n{stack}\n```\n\n{{marker}}\n")
    return outbox.queue(conn, kind="create_issue", dedup_key=f"auto-issue:{error['id']}", repo=error["githubRepo"],
                        issue_number=None, payload={"title": title, "body": body, "labels": ["bug", "auto-detected"],
                                                    "errorId": error["id"]}, now=now)


def set_issue(conn: Connection, *, error_id: str, number: int, url: str | None, now: int) -> None:
    conn.execute("UPDATE errorLogs SET githubIssueNumber = ?, githubIssueUrl = ?, updatedAt = ? WHERE id = ?",
                 (number, url, now, error_id))


def error_doc(row: Row) -> dict[str, Any]:
    return to_doc(row)


def get_error(conn: Connection, *, error_id: str) -> dict[str, Any] | None:
    row = conn.one("SELECT * FROM errorLogs WHERE id = ?", (error_id,))
    return error_doc(row) if row else None


def list_errors(conn: Connection, *, deployment: str | None, limit: int | None, cursor: str | None,
                fields: str | None) -> dict[str, Any]:
    """Newest first, optionally of one deployment (by name); `{items, nextCursor?}`."""
    where, params = equals((("deployment", deployment),))
    return keyset_page(conn, table="errorLogs", to_item=error_doc, where=where, params=params, limit=limit,
                       cursor=cursor, fields=fields, lite_keys=ERROR_LITE)
