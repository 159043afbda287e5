"""Issue #19 case 4: outbound HTTP never carries credentials to another origin.

A fake GitHub API and a fake deployment log endpoint (loopback) answer 302 to a second loopback
listener, which records every request's headers: it must never see `Authorization`.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from conftest import make_settings, open_tools
from support.github_helpers import DEPLOY_KEY, TOKEN

from vantage_peers.core import outbound
from vantage_peers.core.ids import now_ms
from vantage_peers.domains.github import irp, issues, monitors, outbox
from vantage_peers.domains.github.client import GitHubClient
from vantage_peers.domains.github.sender import Sender
from vantage_peers.server import create_app

REPO = "acme/widgets"


class Listener:
    """A loopback HTTP server answering every request with `respond(path) -> (status, headers, body)`."""

    def __init__(self, respond) -> None:
        self.seen: list[dict[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                outer.seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
                status, headers, body = respond(self.path)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _any  # noqa: N815

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def thief():
    server = Listener(lambda path: (200, {"Content-Type": "application/json"}, b'{"id": 1, "body": "stolen"}'))
    yield server
    server.stop()


@pytest.fixture
def redirector(thief):
    server = Listener(lambda path: (302, {"Location": thief.url + path}, b""))
    yield server
    server.stop()


def test_github_outbox_never_sends_the_token_to_the_redirect_target(db_path, redirector, thief):
    app = create_app(make_settings(db_path, github_token=TOKEN, github_api_url=redirector.url,
                                   github_retry_seconds=0.05))
    try:
        app.db.write(lambda c: (issues.ensure(c, repo=REPO, number=7, mapping={"project": "p", "orchestrator": "o",
                                                                                 "repo": REPO}, now=now_ms()),
                                irp.queue_comment(c, repo=REPO, number=7, step=0, orchestrator="o", now=now_ms())))
        for _ in range(3):
            Sender(app).run()
        assert redirector.seen and redirector.seen[0]["authorization"] == f"Bearer {TOKEN}"
        assert all("authorization" not in h for h in thief.seen)
        assert not any(TOKEN in str(h) for h in thief.seen)
        assert app.db.read(outbox.pending_count) == 1  # not acknowledged as sent
    finally:
        app.db.close()


def test_deployment_key_never_reaches_the_redirect_target(db_path, redirector, thief, monkeypatch):
    monkeypatch.setenv("DEPLOY_KEY_REDIR", DEPLOY_KEY)
    app = create_app(make_settings(db_path))
    try:
        with open_tools(app) as tools:
            tools.call("add_deployment", name="redir", deploymentUrl=redirector.url, deployKeyEnvVar="DEPLOY_KEY_REDIR",
                       githubRepo=REPO, orchestrator="dave")
        out = monitors.run_error_monitor(app)
        assert redirector.seen and redirector.seen[0]["authorization"] == f"Convex {DEPLOY_KEY}"
        assert all("authorization" not in h for h in thief.seen)
        assert not any(DEPLOY_KEY in str(h) for h in thief.seen)
        assert "redirect refused" in out["errors"][0]
    finally:
        app.db.close()


def test_same_origin_redirect_is_followed_with_the_credentials():
    def respond(path):
        if path.startswith("/old"):
            return 301, {"Location": "/new" + path[4:]}, b""
        return 200, {"Content-Type": "application/json"}, b'{"ok": true}'

    server = Listener(respond)
    try:
        resp = GitHubClient(token=TOKEN, api_url=server.url).request("GET", "/old/repos/x")
        assert resp.ok and resp.body == {"ok": True}
        assert [h["path"] for h in server.seen] == ["/old/repos/x", "/new/repos/x"]
        assert all(h["authorization"] == f"Bearer {TOKEN}" for h in server.seen)
    finally:
        server.stop()


def test_secret_headers_named_by_the_caller_count_as_credentials(redirector, thief):
    reply = outbound.request("GET", redirector.url + "/x", headers={"X-Api-Key": "k-123"}, secret_headers=("X-Api-Key",))
    assert reply.status is None and "redirect refused" in (reply.error or "")
    assert thief.seen == []
    # Without credentials a cross-origin redirect is simply followed.
    reply = outbound.request("GET", redirector.url + "/y", headers={"Accept": "application/json"})
    assert reply.status == 200 and len(thief.seen) == 1


def test_response_size_is_capped_and_redirect_loops_end():
    big = Listener(lambda path: (200, {}, b"x" * 5000))
    loop = Listener(lambda path: (302, {"Location": "/again"}, b""))
    try:
        reply = outbound.request("GET", big.url, max_bytes=4096)
        assert reply.status is None and "too large" in (reply.error or "")
        assert outbound.request("GET", big.url, max_bytes=5000).status == 200
        reply = outbound.request("GET", loop.url, max_redirects=3)
        assert reply.status is None and "too many redirects" in (reply.error or "") and len(loop.seen) == 4
    finally:
        big.stop()
        loop.stop()


def test_redirect_to_a_non_http_scheme_is_refused():
    server = Listener(lambda path: (302, {"Location": "file:///etc/passwd"}, b""))
    try:
        reply = outbound.request("GET", server.url)
        assert reply.status is None and "not an http(s) URL" in (reply.error or "")
    finally:
        server.stop()
