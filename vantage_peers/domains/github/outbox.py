"""The durable outbox: every outbound GitHub call is a row queued in the transaction that causes it.

A scheduler job (sender.py) claims due rows with a lease in one UPDATE, sends them, and records
the outcome. `dedupKey` makes queueing idempotent (the T6 comment of an issue is queued once, however
many processes complete tasks). Each queued comment or issue carries an invisible marker
(`<!-- vantage-peers:outbox:<id> -->`) so that a retry after an unknown outcome first looks for it
on GitHub instead of posting twice.
"""

from __future__ import annotations

import random
from typing import Any

from ...core.ids import new_id, now_ms
from ...db import Connection, Row, dumps, loads

MAX_ATTEMPTS = 8
LEASE_MS = 120_000
RATE_LIMIT_KEY = "github:rateLimitedUntil"


def marker(outbox_id: str) -> str:
    return f"<!-- vantage-peers:outbox:{outbox_id} -->"


def queue(conn: Connection, *, kind: str, dedup_key: str, repo: str, issue_number: int | None,
          payload: dict[str, Any], now: int | None = None) -> str | None:
    """Queue one call; returns its id, or None when `dedup_key` was queued before (nothing added)."""
    now = now or now_ms()
    outbox_id = new_id("gho")
    body = dict(payload)
    if "body" in body and kind in ("comment", "create_issue"):
        body["body"] = body["body"].replace("{marker}", marker(outbox_id))
    row = conn.one(
        "INSERT INTO githubOutbox (id, kind, dedupKey, repo, issueNumber, payload, nextAttemptAt, createdAt, "
        "updatedAt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dedupKey) DO NOTHING RETURNING id",
        (outbox_id, kind, dedup_key, repo, issue_number, dumps(body), now, now, now),
    )
    return row["id"] if row else None


def rate_limited_until(conn: Connection) -> int:
    value = conn.scalar("SELECT value FROM meta WHERE key = ?", (RATE_LIMIT_KEY,))
    return int(value) if value else 0


def set_rate_limited(conn: Connection, until: int) -> None:
    """Every process sharing the file honours one GitHub rate-limit window (the later one wins)."""
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = "
                 "CAST(max(CAST(meta.value AS INTEGER), CAST(excluded.value AS INTEGER)) AS TEXT)",
                 (RATE_LIMIT_KEY, str(until)))


def claim(conn: Connection, *, owner: str, now: int, limit: int = 10) -> list[Row]:
    """Lease up to `limit` due rows to `owner` in one statement (no two processes get one row).

    A row still `inFlight` from an earlier lease (its sender died or hung) becomes `maybeSent`.
    Comments on one issue go out in the order they were queued: a comment waits while an earlier
    one on the same issue is still pending (e.g. retrying after a 5xx), so a thread never reads
    "Fix ready" before "Bug reproduced".
    """
    rows = conn.query(
        "UPDATE githubOutbox SET leaseOwner = ?1, leaseUntil = ?2 + ?3, attempts = attempts + 1, "
        "maybeSent = CASE WHEN inFlight = 1 THEN 1 ELSE maybeSent END, inFlight = 1, updatedAt = ?2 "
        "WHERE id IN (SELECT o.id FROM githubOutbox o WHERE o.status = 'pending' AND o.nextAttemptAt <= ?2 "
        "AND (o.leaseUntil IS NULL OR o.leaseUntil <= ?2) "
        "AND (o.kind <> 'comment' OR NOT EXISTS (SELECT 1 FROM githubOutbox e WHERE e.kind = 'comment' "
        "AND e.status = 'pending' AND e.repo = o.repo AND e.issueNumber = o.issueNumber AND e.seq < o.seq)) "
        "ORDER BY o.nextAttemptAt, o.seq LIMIT ?4) RETURNING *",
        (owner, now, LEASE_MS, limit),
    )
    for row in rows:
        row["payload"] = loads(row["payload"])
    return sorted(rows, key=lambda r: r["seq"])


def renew(conn: Connection, *, row: Row, owner: str, now: int) -> bool:
    return conn.execute("UPDATE githubOutbox SET leaseUntil = ? WHERE id = ? AND leaseOwner = ? AND status = 'pending'",
                        (now + LEASE_MS, row["id"], owner)) > 0


def mark_sent(conn: Connection, *, row: Row, owner: str, status: int | None, result: dict[str, Any],
              now: int) -> bool:
    """Done, if this process still holds the lease (a lost lease means another process owns the row)."""
    return conn.execute(
        "UPDATE githubOutbox SET status = 'sent', sentAt = ?, lastStatus = ?, result = ?, inFlight = 0, "
        "leaseOwner = NULL, leaseUntil = NULL, lastError = NULL, updatedAt = ? "
        "WHERE id = ? AND leaseOwner = ? AND status = 'pending'",
        (now, status, dumps(result), now, row["id"], owner),
    ) > 0


def backoff_ms(attempts: int, base_seconds: float) -> int:
    delay = min(base_seconds * (2 ** max(0, attempts - 1)), 3600.0)
    return int(delay * 1000 * (1 + random.random() * 0.1))


def mark_failed(conn: Connection, *, row: Row, owner: str, status: int | None, error: str, now: int,
                retry_at: int | None, uncertain: bool, permanent: bool = False) -> None:
    """A failed attempt: retried at `retry_at`, or given up (`failed`) when permanent or out of attempts."""
    rate_limited = error.startswith("RATE_LIMITED")  # never given up for a rate limit
    give_up = permanent or retry_at is None or (row["attempts"] >= MAX_ATTEMPTS and not rate_limited)
    conn.execute(
        "UPDATE githubOutbox SET status = ?, nextAttemptAt = coalesce(?, nextAttemptAt), lastStatus = ?, "
        "lastError = ?, inFlight = 0, maybeSent = max(maybeSent, ?), leaseOwner = NULL, leaseUntil = NULL, "
        "updatedAt = ? WHERE id = ? AND leaseOwner = ? AND status = 'pending'",
        ("failed" if give_up else "pending", retry_at, status, error[:2000], int(uncertain), now, row["id"], owner),
    )


def pending_count(conn: Connection) -> int:
    return int(conn.scalar("SELECT count(*) FROM githubOutbox WHERE status = 'pending'") or 0)
