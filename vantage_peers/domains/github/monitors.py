"""Scheduled jobs (spec §27.10): the error monitor, the PR monitor and the daily issue stats.

Each is safe to run on every tick of every process: the error monitor leases each deployment and
advances its log cursor by compare-and-set; the PR monitor queues one status read per issue and
hour (dedup key); the stats job upserts one row per repo and UTC day.
"""

from __future__ import annotations

import os
import re
import statistics
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ...core.ids import new_id, now_ms
from ...core.parties import SYSTEM
from ...db import Connection, dumps
from ..messaging import store as messaging
from . import deployments, outbox
from .client import fetch_json
from .common import utc_day

LOG_TIMEOUT_SECONDS = 5.0  # the log endpoint long-polls when nothing is new: a timeout means "no news"
PIVOT_MS = 1_775_001_600_000  # 2026-04-01T00:00:00Z, the documented before/after VantageOS split
PR_URL = re.compile(r"^https?://[^/]+/([^/\s]+/[^/\s]+)/pull/(\d{1,9})/?$")
NOTIFY_FALLBACK = "pi"
POLL_INTERVAL_MS = 300_000
DELIVERY_KEEP_MS = 30 * 86_400_000  # spec §20: every 5 minutes  # the docs: "notifies Pi" when no mapping names an orchestrator


# -- error monitor ------------------------------------------------------------------------------
def _clean(text: str) -> str:
    """Text a database can store: an unpaired surrogate from JSON (`"\\ud800"`) becomes `?`."""
    return text.encode("utf-8", "replace").decode("utf-8")


def parse_entries(body: Any) -> tuple[list[dict[str, Any]], float | None]:
    """Errors and `newCursor` from Convex's `GET /api/stream_function_logs` answer
    (`{entries: [{identifier, udfType, error, logLines, timestamp (s), requestId, kind}], newCursor}`)."""
    if not isinstance(body, dict) or not isinstance(body.get("entries"), list):
        return [], None
    cursor = body.get("newCursor")
    cursor = float(cursor) if isinstance(cursor, int | float) and not isinstance(cursor, bool) else None
    out = []
    for entry in body["entries"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("error"), str) or not entry["error"].strip():
            continue
        if entry.get("kind") not in (None, "Completion"):
            continue
        text = _clean(entry["error"]).strip()
        first = text.splitlines()[0].strip()
        lines = [ln if isinstance(ln, str) else " ".join(map(str, ln.get("messages", [])))
                 for ln in entry.get("logLines") or [] if isinstance(ln, str | dict)]
        stack = text + ("\n\nLog lines:\n" + _clean("\n".join(lines)) if lines else "")
        ts = entry.get("timestamp")
        out.append({
            "functionName": _clean(str(entry.get("identifier") or "unknown"))[:500],
            "errorMessage": first[:2000],
            "stackTrace": stack[:60_000],
            "udfType": _clean(str(entry.get("udfType")))[:50] if entry.get("udfType") else None,
            "requestId": _clean(str(entry.get("requestId")))[:200] if entry.get("requestId") else None,
            "seenAt": int(ts * 1000) if isinstance(ts, int | float) and not isinstance(ts, bool) else None,
        })
    return out, cursor


def _fetch(dep: dict[str, Any]) -> tuple[Any, str | None]:
    """(response, problem) for one deployment's `GET /api/stream_function_logs?cursor=…`."""
    key = os.environ.get(dep["deployKeyEnvVar"])
    if not key:
        return None, f"{dep['deployKeyEnvVar']} is not set in this server's environment"
    url = dep["deploymentUrl"].rstrip("/") + "/api/stream_function_logs?" + urllib.parse.urlencode(
        {"cursor": _cursor_text(dep["logCursor"])})
    resp = fetch_json(url, headers={"Authorization": f"Convex {key}", "Convex-Client": "vantage-peers"},
                      timeout=LOG_TIMEOUT_SECONDS)
    if resp.status is None and (resp.error or "").startswith("timeout"):
        return None, None  # a long poll with nothing new
    if not resp.ok:
        return None, f"log fetch failed: {resp.status or resp.error}"
    return resp, None


def run_error_monitor(app, now: int | None = None, min_interval_ms: int = 0) -> dict[str, Any]:
    """Poll every due deployment (in parallel: the endpoint long-polls), record errors, queue [Auto] issues."""
    owner = f"errmon-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    now = now or now_ms()
    db = app.db
    claimed = db.write(lambda c: deployments.claim_due(c, owner=owner, now=now, min_interval_ms=min_interval_ms))
    summary: dict[str, Any] = {"deployments": len(claimed), "new": 0, "repeats": 0, "errors": []}
    if not claimed:
        return summary
    with ThreadPoolExecutor(max_workers=min(8, len(claimed))) as pool:
        fetched = list(pool.map(_fetch, claimed))
    for dep, (resp, problem) in zip(claimed, fetched, strict=True):
        if resp is not None:
            errors, cursor = parse_entries(resp.body)
            if cursor is None:
                problem = "log endpoint answered without entries/newCursor"
            else:
                done = db.write(lambda c, dep=dep, errors=errors, cursor=cursor: deployments.record_batch(
                    c, deployment=dep, owner=owner, old_cursor=dep["logCursor"], new_cursor=cursor,
                    errors=errors, now=now_ms()))
                summary["new"] += done["new"]
                summary["repeats"] += done["repeats"]
                if not done["skipped"]:
                    continue
        if problem:
            summary["errors"].append(f"{dep['name']}: {problem}")
        db.write(lambda c, dep=dep, problem=problem: deployments.release(
            c, deployment_id=dep["id"], owner=owner, now=now_ms(), error=problem))
    if summary["new"]:
        app.wake("github.outbox")
    return summary


def _cursor_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


# -- PR monitor ---------------------------------------------------------------------------------
def run_pr_monitor(app, now: int | None = None) -> dict[str, Any]:
    """Queue one PR read per issue with prStatus open/draft and hour; the outbox job makes the calls."""
    now = now or now_ms()
    hour = now // 3_600_000

    def tx(c: Connection) -> int:
        queued = 0
        for row in c.query("SELECT id, repo, issueNumber, prUrl FROM issues WHERE prStatus IN ('open', 'draft') "
                           "AND prUrl IS NOT NULL"):
            m = PR_URL.match(row["prUrl"])
            if not m:
                continue
            queued += outbox.queue(c, kind="pr_status", dedup_key=f"pr:{row['id']}:{hour}", repo=row["repo"],
                                   issue_number=row["issueNumber"], now=now, payload={
                                       "issueId": row["id"], "prRepo": m.group(1), "prNumber": int(m.group(2))}) is not None
        return queued

    queued = app.db.write(tx)
    if queued:
        app.wake("github.outbox")
    return {"queued": queued}


def apply_pr_state(conn: Connection, *, issue_id: str, body: dict[str, Any], now: int) -> str | None:
    """A PR read came back: merged / closed / draft / open; a move to merged or closed messages the owner."""
    if body.get("merged") is True or body.get("merged_at"):
        status = "merged"
    elif body.get("state") == "closed":
        status = "closed"
    elif body.get("draft") is True:
        status = "draft"
    elif body.get("state") == "open":
        status = "open"
    else:
        return None
    row = conn.one("UPDATE issues SET prStatus = ?, updatedAt = ? WHERE id = ? AND prStatus IN ('open', 'draft') "
                   "AND prStatus != ? RETURNING *", (status, now, issue_id, status))
    if row is not None and status in ("merged", "closed"):
        mapping = conn.one("SELECT orchestrator FROM githubRepoMapping WHERE repo = ? COLLATE NOCASE", (row["repo"],))
        to = (mapping["orchestrator"] if mapping else None) or row["orchestrator"] or NOTIFY_FALLBACK
        what = "was merged" if status == "merged" else "was closed without merge"
        messaging.send_message(conn, sender=SYSTEM, channel=to, content=(
            f"PR {row['prUrl']} for issue {row['repo']}#{row['issueNumber']} {what} (prStatus={status})."))
    return status if row is not None else None


# -- issue stats --------------------------------------------------------------------------------
def _minutes(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "min": None, "max": None, "avg": None}
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2),
            "max": round(max(values), 2), "avg": round(sum(values) / len(values), 2)}


def run_issue_stats(app, now: int | None = None) -> dict[str, Any]:
    """Upsert today's snapshot per active mapping, from the issues the webhook synced (minutes)."""
    now = now or now_ms()
    day = utc_day(now)

    def tx(c: Connection) -> int:
        n = 0
        for mapping in c.query("SELECT repo, project FROM githubRepoMapping WHERE active = 1"):
            rows = c.query("SELECT coalesce(openedAt, createdAt) AS opened, firstResponseAt, closedAt FROM issues "
                           "WHERE repo = ? COLLATE NOCASE", (mapping["repo"],))
            fixes = [(r["closedAt"] - r["opened"]) / 60_000 for r in rows if r["closedAt"] and r["closedAt"] >= r["opened"]]
            firsts = [(r["firstResponseAt"] - r["opened"]) / 60_000 for r in rows
                      if r["firstResponseAt"] and r["firstResponseAt"] >= r["opened"]]
            fix = _minutes(fixes)

            def era(selected: list[dict[str, Any]]) -> str | None:
                times = [(r["closedAt"] - r["opened"]) / 60_000 for r in selected
                         if r["closedAt"] and r["closedAt"] >= r["opened"]]
                return dumps({"totalIssues": len(selected), "resolvedIssues": len(times),
                              "medianTimeToFix": _minutes(times)["median"]})

            c.execute(
                "INSERT INTO issueStats (id, repo, project, day, totalIssues, resolvedIssues, medianTimeToFirstResponse, "
                "medianTimeToFix, fastestResolution, slowestResolution, avgTimeToFix, beforeVantageOS, afterVantageOS, "
                "createdAt, updatedAt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (repo, day) DO UPDATE SET project = excluded.project, totalIssues = excluded.totalIssues, "
                "resolvedIssues = excluded.resolvedIssues, medianTimeToFirstResponse = excluded.medianTimeToFirstResponse, "
                "medianTimeToFix = excluded.medianTimeToFix, fastestResolution = excluded.fastestResolution, "
                "slowestResolution = excluded.slowestResolution, avgTimeToFix = excluded.avgTimeToFix, "
                "beforeVantageOS = excluded.beforeVantageOS, afterVantageOS = excluded.afterVantageOS, "
                "updatedAt = excluded.updatedAt",
                (new_id("ist"), mapping["repo"], mapping["project"], day, len(rows), len(fixes),
                 _minutes(firsts)["median"], fix["median"], fix["min"], fix["max"], fix["avg"],
                 era([r for r in rows if r["opened"] < PIVOT_MS]), era([r for r in rows if r["opened"] >= PIVOT_MS]),
                 now, now))
            n += 1
        return n

    repos = app.db.write(tx)
    # GitHub redelivers for a few days at most: delivery ids older than 30 days can no longer come back.
    pruned = app.db.write(lambda c: c.execute("DELETE FROM githubDeliveries WHERE receivedAt < ?",
                                              (now - DELIVERY_KEEP_MS,)))
    return {"day": day, "repos": repos, "deliveriesPruned": pruned}

