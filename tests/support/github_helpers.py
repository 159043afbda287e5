"""Loopback fakes for the GitHub tests: a GitHub REST API, a Convex log endpoint, signed deliveries,
and a real uvicorn server serving `app.routes` on 127.0.0.1.

`FakeGitHub` answers the calls the outbox makes (issue comments, issue creation, listing both,
pull requests), checks `Authorization: Bearer <token>`, records what was created, and can be told to
fail: `fail_each_new(n)` answers 500 to the first n POSTs of every distinct body (a flaky GitHub),
`rate_limit_next(mode)` answers 403 with exhausted `X-RateLimit-*` headers or `Retry-After`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
import time
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

TOKEN = "ghp_test_token_123"
SECRET = "It's a Secret to Everybody"
DEPLOY_KEY = "prod:calm-gerbil-63|test-admin-key"


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


class _Server:
    def __init__(self, handler_factory) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_factory)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class FakeGitHub(_Server):
    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.lock = threading.Lock()
        self.comments: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.issues: dict[str, list[dict[str, Any]]] = {}
        self.pulls: dict[tuple[str, int], dict[str, Any]] = {}
        self.requests: list[tuple[str, str]] = []
        self.fail_new = 0
        self.fail_posts = 0  # the next N POSTs answer 500, whatever they carry
        self.failures: Counter = Counter()
        self.rate_limits: list[str] = []
        self.next_id = 1000
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.send_header("X-RateLimit-Limit", "5000")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                if "X-RateLimit-Remaining" not in (headers or {}):
                    self.send_header("X-RateLimit-Remaining", "4999")
                self.end_headers()
                self.wfile.write(raw)

            def _handle(self, method: str) -> None:
                parsed = urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                with fake.lock:
                    fake.requests.append((method, parsed.path))
                if self.headers.get("Authorization") != f"Bearer {fake.token}":
                    return self._send(401, {"message": "Bad credentials"})
                parts = parsed.path.strip("/").split("/")
                if method == "POST":
                    with fake.lock:
                        if fake.rate_limits:
                            mode = fake.rate_limits.pop(0)
                            if mode == "retry-after":
                                return self._send(403, {"message": "You have exceeded a secondary rate limit"},
                                                  {"Retry-After": "1"})
                            reset = str(int(time.time()) + 1)
                            return self._send(403, {"message": "API rate limit exceeded"},
                                              {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset})
                        if fake.fail_posts > 0:
                            fake.fail_posts -= 1
                            return self._send(500, {"message": "Server Error"})
                        key = json.dumps(body, sort_keys=True)
                        if fake.failures[key] < fake.fail_new:
                            fake.failures[key] += 1
                            return self._send(500, {"message": "Server Error"})
                query = {k: v[0] for k, v in parse_qs(parsed.query).items()}
                # /repos/{o}/{r}/issues/{n}/comments
                if len(parts) == 6 and parts[0] == "repos" and parts[3] == "issues" and parts[5] == "comments":
                    repo, number = f"{parts[1]}/{parts[2]}", int(parts[4])
                    with fake.lock:
                        items = fake.comments.setdefault((repo, number), [])
                        if method == "POST":
                            fake.next_id += 1
                            item = {"id": fake.next_id, "body": body["body"], "user": {"login": "vp-bot"},
                                    "html_url": f"https://github.com/{repo}/issues/{number}#issuecomment-{fake.next_id}"}
                            items.append(item)
                            return self._send(201, item)
                        page, per = int(query.get("page", 1)), int(query.get("per_page", 30))
                        return self._send(200, items[(page - 1) * per: page * per])
                if len(parts) == 4 and parts[0] == "repos" and parts[3] == "issues":
                    repo = f"{parts[1]}/{parts[2]}"
                    with fake.lock:
                        items = fake.issues.setdefault(repo, [])
                        if method == "POST":
                            number = len(items) + 1
                            item = {"number": number, "title": body["title"], "body": body.get("body"),
                                    "labels": [{"name": n} for n in body.get("labels", [])],
                                    "html_url": f"https://github.com/{repo}/issues/{number}"}
                            items.append(item)
                            return self._send(201, item)
                        label = query.get("labels")
                        found = [i for i in reversed(items)
                                 if not label or label in [lb["name"] for lb in i["labels"]]]
                        page, per = int(query.get("page", 1)), int(query.get("per_page", 30))
                        return self._send(200, found[(page - 1) * per: page * per])
                if len(parts) == 5 and parts[0] == "repos" and parts[3] == "pulls" and method == "GET":
                    pr = fake.pulls.get((f"{parts[1]}/{parts[2]}", int(parts[4])))
                    return self._send(200, pr) if pr else self._send(404, {"message": "Not Found"})
                return self._send(404, {"message": "Not Found"})

            def do_GET(self) -> None:  # noqa: N802
                self._handle("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._handle("POST")

        super().__init__(Handler)

    def all_comments(self) -> list[dict[str, Any]]:
        with self.lock:
            return [c for items in self.comments.values() for c in items]

    def all_issues(self) -> list[dict[str, Any]]:
        with self.lock:
            return [i for items in self.issues.values() for i in items]


class FakeConvexLogs(_Server):
    """`GET /api/stream_function_logs?cursor=<ms>` with `Authorization: Convex <key>`, like a Convex deployment."""

    def __init__(self, key: str = DEPLOY_KEY) -> None:
        self.key = key
        self.entries: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.calls: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                parsed = urlparse(self.path)
                fake.calls.append(self.path)
                if parsed.path != "/api/stream_function_logs":
                    self.send_response(404)
                    self.end_headers()
                    return
                if self.headers.get("Authorization") != f"Convex {fake.key}":
                    raw = b'{"code":"BadAdminKey","message":"The provided admin key was invalid"}'
                    self.send_response(401)
                else:
                    cursor = float(parse_qs(parsed.query).get("cursor", ["0"])[0])
                    with fake.lock:
                        new = [e for e in fake.entries if e["timestamp"] * 1000 > cursor]
                        top = max([cursor] + [e["timestamp"] * 1000 for e in new])
                    raw = json.dumps({"entries": new, "newCursor": top}).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        super().__init__(Handler)

    def add_error(self, identifier: str, message: str, *, at: float | None = None) -> None:
        """One failed function execution, shaped like Convex's FunctionExecutionJson (kind Completion)."""
        with self.lock:
            ts = at if at is not None else time.time() + len(self.entries) * 0.001
            self.entries.append({
                "kind": "Completion", "identifier": identifier, "udfType": "Mutation", "cachedResult": False,
                "executionTime": 0.012, "timestamp": ts, "requestId": uuid.uuid4().hex[:16],
                "executionId": uuid.uuid4().hex, "logLines": ["[LOG] 'charging credits'"], "success": None,
                "error": f"Uncaught Error: {message}\n    at handler (../convex/{identifier.split(':')[0]}:42:11)",
            })

    def add_success(self, identifier: str) -> None:
        with self.lock:
            self.entries.append({"kind": "Completion", "identifier": identifier, "udfType": "Query",
                                 "timestamp": time.time() + len(self.entries) * 0.001, "error": None,
                                 "logLines": [], "requestId": "r", "executionTime": 0.001})


# -- webhook deliveries ------------------------------------------------------------------------
def signature(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def github_headers(event: str, body: bytes, *, delivery: str | None = None, secret: str | None = SECRET,
                   sig: str | None = None) -> dict[str, str]:
    """The headers GitHub sends with a repository webhook delivery."""
    headers = {
        "Content-Type": "application/json", "User-Agent": "GitHub-Hookshot/044aadd", "Accept": "*/*",
        "X-GitHub-Event": event, "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-GitHub-Hook-ID": "292430182", "X-GitHub-Hook-Installation-Target-ID": "79929171",
        "X-GitHub-Hook-Installation-Target-Type": "repository",
    }
    if secret is not None:
        headers["X-Hub-Signature"] = "sha1=" + hmac.new(secret.encode(), body, hashlib.sha1).hexdigest()
        headers["X-Hub-Signature-256"] = sig or signature(body, secret)
    elif sig is not None:
        headers["X-Hub-Signature-256"] = sig
    return headers


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, json.loads(raw) if raw else None


def deliver(base_url: str, event: str, payload: dict[str, Any], **kw: Any) -> tuple[int, Any]:
    body = json.dumps(payload).encode()
    return post(base_url + "/github/webhook", body, github_headers(event, body, **kw))


_USER = {"login": "octocat", "id": 1, "node_id": "MDQ6VXNlcjE=", "type": "User", "site_admin": False,
         "html_url": "https://github.com/octocat"}


def repository(full_name: str) -> dict[str, Any]:
    owner, name = full_name.split("/")
    return {"id": 1296269, "node_id": "MDEwOlJlcG9zaXRvcnkxMjk2MjY5", "name": name, "full_name": full_name,
            "private": False, "owner": {**_USER, "login": owner}, "html_url": f"https://github.com/{full_name}",
            "default_branch": "main"}


def issue(full_name: str, number: int, title: str = "Credits deducted twice", *, user: str = "octocat",
          state: str = "open", labels: tuple[str, ...] = ("bug",)) -> dict[str, Any]:
    return {
        "url": f"https://api.github.com/repos/{full_name}/issues/{number}",
        "html_url": f"https://github.com/{full_name}/issues/{number}", "id": 1000 + number,
        "node_id": "MDU6SXNzdWUx", "number": number, "title": title, "user": {**_USER, "login": user},
        "labels": [{"id": 208045946, "name": n, "color": "f29513", "default": True} for n in labels],
        "state": state, "locked": False, "assignee": None, "assignees": [], "milestone": None, "comments": 0,
        "created_at": "2026-06-01T10:00:00Z", "updated_at": "2026-06-01T10:00:00Z",
        "closed_at": "2026-06-01T12:00:00Z" if state == "closed" else None, "author_association": "OWNER",
        "body": "Steps to reproduce: buy a pack twice quickly.",
    }


def issues_event(action: str, full_name: str, number: int, **kw: Any) -> dict[str, Any]:
    return {"action": action, "issue": issue(full_name, number, **kw), "repository": repository(full_name),
            "sender": _USER}


def comment_event(full_name: str, number: int, user: str, created_at: str) -> dict[str, Any]:
    return {"action": "created", "issue": issue(full_name, number),
            "comment": {"id": 5, "body": "Looking at it", "user": {**_USER, "login": user}, "created_at": created_at,
                        "updated_at": created_at, "author_association": "MEMBER"},
            "repository": repository(full_name), "sender": _USER}


def pull_request_event(action: str, full_name: str, number: int, *, body: str, merged: bool = False,
                       state: str = "open", draft: bool = False) -> dict[str, Any]:
    return {"action": action, "number": number, "pull_request": {
        "url": f"https://api.github.com/repos/{full_name}/pulls/{number}", "id": 5000 + number, "number": number,
        "html_url": f"https://github.com/{full_name}/pull/{number}", "state": state, "locked": False,
        "title": "Fix double charge", "user": _USER, "body": body, "draft": draft, "merged": merged,
        "merged_at": "2026-06-02T09:00:00Z" if merged else None, "head": {"ref": "fix"}, "base": {"ref": "main"}},
        "repository": repository(full_name), "sender": _USER}


# -- a real HTTP server for app.routes ----------------------------------------------------------
class RouteServer:
    """`Starlette(routes=app.routes)` under uvicorn on 127.0.0.1 (a free port), in a thread."""

    def __init__(self, app) -> None:
        import uvicorn
        from starlette.applications import Starlette

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(Starlette(routes=list(app.routes)), log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        wait_for(lambda: self.server.started, what="uvicorn start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


def webhook_app(db: Any):
    """A context manager: an app with the webhook secret set and a RouteServer serving its routes.
    `db` is a database file path, or the test's Settings (either backend)."""
    import contextlib

    from conftest import make_settings

    from vantage_peers.server import create_app

    @contextlib.contextmanager
    def run():
        base = db if hasattr(db, "model_copy") else make_settings(db)
        app = create_app(base.model_copy(update={"github_webhook_secret": SECRET, "github_token": None}))
        server = RouteServer(app)
        try:
            yield app, server
        finally:
            server.stop()
            app.db.close()

    return run()
