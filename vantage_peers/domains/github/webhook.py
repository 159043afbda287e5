"""`POST /github/webhook` (spec §16): signed GitHub deliveries, verified before anything is parsed.

Order of checks: size cap → `X-Hub-Signature-256` (HMAC-SHA256 of the raw body with
`GITHUB_WEBHOOK_SECRET`, compared in constant time; missing or bad → 401, nothing written) →
event type (unknown → 204) → nesting depth on the raw bytes (> limits.MAX_DEPTH → 400) → JSON (bad → 400) → payload shape (bad → 400 naming the field) →
`X-GitHub-Delivery` recorded in the same transaction as the effects (a redelivery changes nothing).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...core import limits
from ...core.ids import now_ms
from ...db import Connection
from . import irp, issues, mappings
from .common import REPO_SLUG, clip, iso_to_ms

log = logging.getLogger("vantage_peers.github")
MAX_BODY_BYTES = 5 * 1024 * 1024
HANDLED = {
    "issues": {"opened", "edited", "closed", "reopened", "labeled"},
    "issue_comment": {"created"},
    "pull_request": {"opened", "closed", "reopened", "ready_for_review", "converted_to_draft", "edited"},
    "pull_request_review": {"submitted"},
}
DELIVERY = re.compile(r"^[A-Za-z0-9-]{1,100}$")
CLOSING = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+(?:([\w.-]+/[\w.-]+))?#(\d{1,9})\b",
                     re.IGNORECASE)


def sign(secret: str, body: bytes) -> str:
    """The header value GitHub sends: `sha256=` + hex HMAC-SHA256 of the raw body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str | None, body: bytes, header: str | None) -> bool:
    if not secret or not header:
        return False
    return hmac.compare_digest(sign(secret, body).encode(), header.strip().encode("utf-8", "replace"))


# -- payload shapes (GitHub sends far more; only what is used is checked) ----------------------
class _Lax(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)  # built on first use, not at start (#34)


class User(_Lax):
    login: str = Field(min_length=1, max_length=200)


class Label(_Lax):
    name: str = Field(max_length=200)


class Repository(_Lax):
    full_name: str

    @field_validator("full_name")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not REPO_SLUG.match(v):
            raise ValueError("must be owner/name")
        return v


class Issue(_Lax):
    number: int = Field(gt=0, lt=2**31)
    title: str | None = Field(default=None, max_length=10_000)
    body: str | None = None
    state: str | None = None
    html_url: str | None = Field(default=None, max_length=2000)
    user: User | None = None
    labels: list[Label] = Field(default_factory=list, max_length=500)
    created_at: str | None = None
    closed_at: str | None = None
    pull_request: dict[str, Any] | None = None


class Comment(_Lax):
    user: User | None = None
    created_at: str | None = None


class PullRequest(_Lax):
    number: int = Field(gt=0, lt=2**31)
    html_url: str = Field(max_length=2000)
    state: str
    draft: bool | None = None
    merged: bool | None = None
    merged_at: str | None = None
    title: str | None = None
    body: str | None = None


class Review(_Lax):
    state: str = Field(max_length=100)


class IssuesEvent(_Lax):
    action: str
    issue: Issue
    repository: Repository


class CommentEvent(IssuesEvent):
    comment: Comment


class PullRequestEvent(_Lax):
    action: str
    pull_request: PullRequest
    repository: Repository


class ReviewEvent(PullRequestEvent):
    review: Review


MODELS = {"issues": IssuesEvent, "issue_comment": CommentEvent, "pull_request": PullRequestEvent,
          "pull_request_review": ReviewEvent}


# -- effects (one transaction with the delivery record) ----------------------------------------
def _issue_fields(issue: Issue) -> dict[str, Any]:
    return {"title": clip(issue.title, 1000), "body": clip(issue.body), "githubState": issue.state,
            "htmlUrl": issue.html_url, "author": issue.user.login if issue.user else None,
            "labels": [lb.name for lb in issue.labels], "openedAt": iso_to_ms(issue.created_at)}


def handle_issues(conn: Connection, ev: IssuesEvent, now: int) -> dict[str, Any]:
    repo = ev.repository.full_name
    mapping = mappings.active_for_repo(conn, repo)
    row, created = issues.ensure(conn, repo=repo, number=ev.issue.number, mapping=mapping, now=now,
                                 fields=_issue_fields(ev.issue))
    out: dict[str, Any] = {"issueId": row["id"], "created": created, "mapped": mapping is not None}
    if ev.action == "opened" and mapping is not None:
        out.update(irp.start_irp(conn, issue=row, mapping=mapping, now=now))
    elif ev.action == "closed":
        closed = iso_to_ms(ev.issue.closed_at) or now
        conn.execute("UPDATE issues SET status = 'closed', closedAt = ?, updatedAt = ? WHERE id = ?",
                     (closed, now, row["id"]))
    elif ev.action == "reopened":
        conn.execute("UPDATE issues SET status = 'open', closedAt = NULL, updatedAt = ? WHERE id = ?", (now, row["id"]))
    return out


def handle_comment(conn: Connection, ev: CommentEvent, now: int) -> dict[str, Any]:
    if ev.issue.pull_request is not None:
        return {"ignored": "comment on a pull request"}
    repo = ev.repository.full_name
    mapping = mappings.active_for_repo(conn, repo)
    row, _ = issues.ensure(conn, repo=repo, number=ev.issue.number, mapping=mapping, now=now,
                           fields=_issue_fields(ev.issue))
    at = iso_to_ms(ev.comment.created_at) or now
    by = ev.comment.user.login if ev.comment.user else None
    first = by is not None and by != row["author"] and not by.endswith("[bot]")
    conn.execute("UPDATE issues SET commentCount = commentCount + 1, firstResponseAt = CASE WHEN ? = 1 THEN "
                 "min(coalesce(firstResponseAt, ?), ?) ELSE firstResponseAt END, updatedAt = ? WHERE id = ?",
                 (int(first), at, at, now, row["id"]))
    return {"issueId": row["id"]}


def _linked_numbers(pr: PullRequest, repo: str) -> list[int]:
    """Issues a PR closes in its own repo ("Fixes #12", "closes owner/repo#12")."""
    text = f"{pr.title or ''}\n{pr.body or ''}"
    out = []
    for other, number in CLOSING.findall(text):
        if not other or other.lower() == repo.lower():
            out.append(int(number))
    return list(dict.fromkeys(out))


def handle_pull_request(conn: Connection, ev: PullRequestEvent, now: int) -> dict[str, Any]:
    pr, repo = ev.pull_request, ev.repository.full_name
    if pr.merged or pr.merged_at:
        status = "merged"
    elif pr.state == "closed":
        status = "closed"
    else:
        status = "draft" if pr.draft else "open"
    linked = []
    for number in _linked_numbers(pr, repo):
        row = issues.load(conn, repo, number)
        if row is not None:
            conn.execute("UPDATE issues SET prUrl = ?, prStatus = ?, updatedAt = ? WHERE id = ?",
                         (pr.html_url, status, now, row["id"]))
            linked.append(number)
    # Issues linked to this PR earlier (by URL) follow it even if the body no longer names them.
    conn.execute("UPDATE issues SET prStatus = ?, updatedAt = ? WHERE prUrl = ? AND prStatus IS NOT ?",
                 (status, now, pr.html_url, status))
    return {"prStatus": status, "linkedIssues": linked}


def handle_review(conn: Connection, ev: ReviewEvent, now: int) -> dict[str, Any]:
    changed = conn.execute("UPDATE issues SET prReviewState = ?, updatedAt = ? WHERE prUrl = ?",
                           (ev.review.state.lower(), now, ev.pull_request.html_url))
    return {"issuesUpdated": changed}


HANDLERS = {"issues": handle_issues, "issue_comment": handle_comment, "pull_request": handle_pull_request,
            "pull_request_review": handle_review}


def process(conn: Connection, *, delivery: str, event: str, model: Any, now: int) -> dict[str, Any] | None:
    """Record the delivery and apply it; None when this delivery id was processed before."""
    repo = model.repository.full_name
    fresh = conn.one("INSERT INTO githubDeliveries (deliveryId, event, action, repo, receivedAt) VALUES (?, ?, ?, ?, ?) "
                     "ON CONFLICT (deliveryId) DO NOTHING RETURNING deliveryId", (delivery, event, model.action, repo, now))
    if fresh is None:
        return None
    return HANDLERS[event](conn, model, now)


def _validation(err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first.get("loc", ())) or "payload"
    return f"{loc}: {first.get('msg')}"


def make_route(app) -> Route:
    async def github_webhook(request: Request) -> Response:
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            return JSONResponse({"error": "PAYLOAD_TOO_LARGE"}, status_code=413)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                return JSONResponse({"error": "PAYLOAD_TOO_LARGE"}, status_code=413)
        secret = app.settings.github_webhook_secret
        if not verify(secret, body, request.headers.get("x-hub-signature-256")):
            detail = ("GITHUB_WEBHOOK_SECRET is not set on this server" if not secret else
                      "missing or bad X-Hub-Signature-256")
            return JSONResponse({"error": "UNAUTHORIZED", "detail": detail}, status_code=401)
        event = request.headers.get("x-github-event", "")
        if event == "ping":
            return JSONResponse({"ok": True, "event": "ping"})
        if limits.raw_json_depth_exceeds(body):  # before parsing: json.loads would recurse until it fails
            return JSONResponse({"error": "BAD_JSON", "detail": f"the body nests deeper than {limits.MAX_DEPTH} "
                                 "levels"}, status_code=400)
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return JSONResponse({"error": "BAD_JSON", "detail": "the body is not JSON"}, status_code=400)
        action = data.get("action") if isinstance(data, dict) else None
        if event not in HANDLED or action not in HANDLED[event]:
            return Response(status_code=204)
        delivery = request.headers.get("x-github-delivery", "")
        if not DELIVERY.match(delivery):
            return JSONResponse({"error": "BAD_REQUEST", "detail": "X-GitHub-Delivery is missing or malformed"},
                                status_code=400)
        try:
            model = MODELS[event].model_validate(data)
        except ValidationError as err:
            return JSONResponse({"error": "INVALID_PAYLOAD", "detail": _validation(err)}, status_code=400)
        now = now_ms()
        try:
            result = await anyio.to_thread.run_sync(lambda: app.db.write(
                lambda c: process(c, delivery=delivery, event=event, model=model, now=now)))
        except UnicodeEncodeError:  # JSON may carry an unpaired surrogate ("\ud800") that no database can store
            return JSONResponse({"error": "INVALID_PAYLOAD", "detail": "the payload holds invalid Unicode"},
                                status_code=400)
        if result is None:
            return JSONResponse({"ok": True, "duplicate": True, "delivery": delivery})
        if result.get("commentQueued"):
            app.wake("github.outbox")
        return JSONResponse({"ok": True, "event": event, "action": action, "delivery": delivery, **result})

    return Route("/github/webhook", github_webhook, methods=["POST"])
