"""The outbox job: claim due rows, make the GitHub call, record the outcome (with its effect) in one write.

Outcomes:
- 2xx: `sent`, and the effect applied in the same transaction (issue number on the error log,
  PR status on the issue plus a message to the mapped orchestrator).
- rate limited (403/429 with `Retry-After` or `X-RateLimit-Remaining: 0`): every process waits
  until the window ends (a shared `meta` row); the row is retried then, not given up.
- no answer, timeout or 5xx: retried with exponential backoff; the attempt may have reached
  GitHub, so the next one first looks for the row's marker (no double comment).
- other 4xx: `failed` at once (bad token, unknown repo, validation); `lastError` says why.
Without `GITHUB_TOKEN` nothing is claimed or sent: rows wait, and `doctor` says so.
"""

from __future__ import annotations

import logging
import os
import uuid
from typing import Any

from ...core.ids import now_ms
from ...db import Connection, Row
from . import deployments, outbox
from .client import GitHubClient, Response

log = logging.getLogger("vantage_peers.github")


class Sender:
    def __init__(self, app) -> None:
        self.app = app
        self.owner = f"outbox-{os.getpid()}-{uuid.uuid4().hex[:8]}"

    def client(self) -> GitHubClient | None:
        token = self.app.settings.github_token
        if not token:
            return None
        return GitHubClient(token=token, api_url=self.app.settings.github_api_url)

    def run(self, now: int | None = None, batch: int = 10) -> dict[str, Any]:
        client = self.client()
        db = self.app.db
        if client is None:
            return {"skipped": "GITHUB_TOKEN is not set", "pending": db.read(outbox.pending_count)}
        now = now or now_ms()
        until = db.read(outbox.rate_limited_until)
        if until > now:
            return {"rateLimitedUntil": until}
        rows = db.write(lambda c: outbox.claim(c, owner=self.owner, now=now, limit=batch))
        done = {"sent": 0, "retry": 0, "failed": 0}
        for i, row in enumerate(rows):
            outcome = self._one(client, row)
            done[outcome] = done.get(outcome, 0) + 1
            if outcome == "rate_limited":  # hand the rest back untouched (their lease lapses to now)
                rest = [r["id"] for r in rows[i + 1:]]
                if rest:
                    db.write(lambda c, rest=rest: _unclaim(c, rest, self.owner))
                break
        return done

    # -- one row ------------------------------------------------------------------------------
    def _one(self, client: GitHubClient, row: Row) -> str:
        kind, payload = row["kind"], row["payload"]
        # Renew the lease right before the call: a batch that ran long must not send a row whose lease
        # lapsed (another process may own it now).
        if not self.app.db.write(lambda c: outbox.renew(c, row=row, owner=self.owner, now=now_ms())):
            return "lost"
        if row["maybeSent"] and kind in ("comment", "create_issue"):
            found = (client.find_comment(row["repo"], row["issueNumber"], outbox.marker(row["id"]))
                     if kind == "comment" else
                     client.find_issue(row["repo"], outbox.marker(row["id"]), "auto-detected"))
            if isinstance(found, Response):
                return self._failed(row, found, uncertain=True)
            if found is not None:  # the earlier attempt did reach GitHub
                return self._sent(row, 200, found)
        if kind == "comment":
            resp = client.comment(row["repo"], row["issueNumber"], payload["body"])
        elif kind == "create_issue":
            resp = client.create_issue(row["repo"], payload["title"], payload["body"], payload.get("labels") or [])
        else:
            resp = client.pull(payload["prRepo"], payload["prNumber"])
        if resp.ok:
            now = now_ms()
            until = resp.rate_limited_until(now)
            if until is not None:
                self.app.db.write(lambda c: outbox.set_rate_limited(c, until))
            return self._sent(row, resp.status, resp.body if isinstance(resp.body, dict) else {})
        return self._failed(row, resp, uncertain=resp.status is None or resp.status >= 500)

    def _sent(self, row: Row, status: int | None, body: dict[str, Any]) -> str:
        now = now_ms()
        result = {k: body.get(k) for k in ("id", "number", "html_url", "state", "merged", "draft") if k in body}

        def tx(c: Connection) -> None:
            if outbox.mark_sent(c, row=row, owner=self.owner, status=status, result=result, now=now):
                apply_effect(c, row, body, now)

        self.app.db.write(tx)
        return "sent"

    def _failed(self, row: Row, resp: Response, *, uncertain: bool) -> str:
        now = now_ms()
        until = resp.rate_limited_until(now)
        if until is not None:
            self.app.db.write(lambda c: (outbox.set_rate_limited(c, until), outbox.mark_failed(
                c, row=row, owner=self.owner, status=resp.status, error=f"RATE_LIMITED: until {until}",
                now=now, retry_at=until, uncertain=uncertain)))
            return "rate_limited"
        detail = resp.error or _message(resp.body)
        transient = resp.status is None or resp.status >= 500 or resp.status in (408, 409)
        retry_at = now + outbox.backoff_ms(row["attempts"], self.app.settings.github_retry_seconds) if transient else None
        self.app.db.write(lambda c: outbox.mark_failed(
            c, row=row, owner=self.owner, status=resp.status, error=f"HTTP {resp.status}: {detail}", now=now,
            retry_at=retry_at, uncertain=uncertain, permanent=not transient))
        log.warning("GitHub %s for outbox row %s failed: %s %s", row["kind"], row["id"], resp.status, detail)
        return "retry" if transient else "failed"


def _message(body: Any) -> str:
    if isinstance(body, dict):
        return str(body.get("message") or body)[:500]
    return str(body)[:500]


def _unclaim(conn: Connection, ids: list[str], owner: str) -> None:
    marks = ",".join("?" for _ in ids)
    conn.execute(f"UPDATE githubOutbox SET leaseOwner = NULL, leaseUntil = NULL, inFlight = 0, "
                 f"attempts = attempts - 1 WHERE leaseOwner = ? AND id IN ({marks})", [owner, *ids])


def apply_effect(conn: Connection, row: Row, body: dict[str, Any], now: int) -> None:
    """What a successful call changes here, in the transaction that marks it sent."""
    payload = row["payload"]
    if row["kind"] == "create_issue" and payload.get("errorId") and isinstance(body.get("number"), int):
        deployments.set_issue(conn, error_id=payload["errorId"], number=body["number"], url=body.get("html_url"),
                              now=now)
    elif row["kind"] == "pr_status":
        from .monitors import apply_pr_state

        apply_pr_state(conn, issue_id=payload["issueId"], body=body, now=now)
