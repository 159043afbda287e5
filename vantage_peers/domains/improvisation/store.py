"""The improvisation heuristic over tasks, messages and memories in a time window.

A record is flagged when its body holds a durable-artifact token (a 7–40 hex commit SHA, a `#NNN`
reference, a document id, or a decisive verb) and does not contain `VP-Sources:`. Records by
`system`, by `cron-*` authors, or from webhook ingestion (`webhook*` / `github-webhook*` authors)
are never flagged (the A5 exclusions).
"""

from __future__ import annotations

import heapq
import re
from collections import Counter
from typing import Any

from ...core.ids import now_ms
from ...db import Connection

DAY_MS = 86_400_000
MAX_SAMPLES = 50
SNIPPET_CHARS = 160
FOOTER = "VP-Sources:"

# A SHA needs at least one digit and one letter, so plain numbers and hex-looking words ("facade") are not SHAs.
_SHA = re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{7,40}\b")
_REF = re.compile(r"#\d+\b")
# Convex-style ids (k1…, j…: 32 lowercase base32 chars) and this server's prefixed ids (msg_01K…).
_DOC_ID = re.compile(r"\b(?:k1|j)[0-9a-z]{20,40}\b|\b[a-z]{3}_[0-9A-HJKMNP-TV-Z]{26}\b")
_VERB = re.compile(r"\b(?:merged|deployed|approved|shipped|released|fixed)\b", re.IGNORECASE)
_EXCLUDED_AUTHOR = re.compile(r"^(?:system$|cron-|webhook|github-webhook)", re.IGNORECASE)

TOKENS = (_SHA, _REF, _DOC_ID, _VERB)


def first_token(body: str) -> re.Match[str] | None:
    """The earliest durable-artifact token in `body`, or None."""
    found = [m for m in (p.search(body) for p in TOKENS) if m]
    return min(found, key=lambda m: m.start()) if found else None


def is_flagged(body: str, author: str | None) -> bool:
    if author and _EXCLUDED_AUTHOR.match(author):
        return False
    return FOOTER not in body and first_token(body) is not None


def _snippet(body: str) -> str:
    match = first_token(body)
    start = max(0, (match.start() if match else 0) - SNIPPET_CHARS // 3)
    text = " ".join(body[start : start + SNIPPET_CHARS].split())
    return ("…" if start else "") + text


def _queries(since: int, now: int, orchestrators: list[str] | None) -> list[tuple[str, str, list[Any]]]:
    """(category, SQL, params) selecting (id, orch, author, body, at) for every record in the window
    without a footer; expired memories are left out like everywhere else."""
    queries = [
        # Tasks: the assignee writes the completion note, so a claim in it is theirs.
        ("task",
         "SELECT id, CASE WHEN completionNote IS NOT NULL THEN assignedTo ELSE createdBy END AS orch, "
         "createdBy AS author, title || char(10) || coalesce(description, '') || char(10) || "
         "coalesce('completionNote: ' || completionNote, '') AS body, updatedAt AS at FROM tasks WHERE updatedAt >= ?",
         [since]),
        ("message", "SELECT id, sender AS orch, sender AS author, content AS body, createdAt AS at "
                    "FROM messages WHERE createdAt >= ?", [since]),
        ("memory", "SELECT id, createdBy AS orch, createdBy AS author, content AS body, createdAt AS at "
                   "FROM memories WHERE createdAt >= ? AND isLatest = 1 AND (expiresAt IS NULL OR expiresAt > ?)",
         [since, now]),
    ]
    out = []
    for category, sql, args in queries:
        sql = f"SELECT id, orch, author, body, at FROM ({sql}) WHERE instr(body, '{FOOTER}') = 0"
        if orchestrators:
            sql += f" AND orch IN ({','.join('?' for _ in orchestrators)})"
            args = [*args, *orchestrators]
        out.append((category, sql, args))
    return out


def digest(conn: Connection, *, window_days: float, orchestrators: list[str] | None) -> dict[str, Any]:
    """Rows are streamed and only hits are kept (counts, plus the 50 newest as samples), so a busy
    window of large records never sits in memory at once."""
    now = now_ms()
    since = now - int(window_days * DAY_MS)
    by_orch: Counter[str] = Counter()
    by_category: Counter[str] = Counter()
    newest: list[tuple[int, str, dict[str, str]]] = []  # min-heap of the MAX_SAMPLES newest hits
    for category, sql, args in _queries(since, now, orchestrators):
        for rid, orch, author, body, at in conn.rows(sql, args):
            if not is_flagged(body, author):
                continue
            by_orch[orch] += 1
            by_category[category] += 1
            entry = (at, rid, {"id": rid, "category": category, "orchestrator": orch, "snippet": _snippet(body)})
            if len(newest) < MAX_SAMPLES:
                heapq.heappush(newest, entry)
            elif entry[:2] > newest[0][:2]:
                heapq.heapreplace(newest, entry)
    newest.sort(key=lambda e: (e[0], e[1]), reverse=True)
    return {"countsByOrch": dict(by_orch), "countsByCategory": dict(by_category),
            "samples": [sample for _, _, sample in newest]}
