"""Issue #19 case 7: webhook bodies it cannot parse (depth, size) are answered 400/413 before any work."""

from __future__ import annotations

import http.client
import json

import pytest
from support.github_helpers import github_headers, issues_event, post, webhook_app

from vantage_peers.domains.github import webhook

pytestmark = pytest.mark.backends

REPO = "acme/widgets"


@pytest.fixture
def served(settings):
    with webhook_app(settings) as pair:
        yield pair


def deliveries(app) -> int:
    return app.db.read(lambda c: c.scalar("SELECT count(*) FROM githubDeliveries"))


@pytest.mark.parametrize("opener,closer", [(b"[", b"]"), (b'{"a":', b"}")])
def test_signed_100000_deep_body_is_400_not_500(served, opener, closer):
    app, server = served
    body = b'{"action": "opened", "issue": ' + opener * 100_000 + b"1" + closer * 100_000 + b"}"
    status, out = post(server.url + "/github/webhook", body, github_headers("issues", body))
    assert status == 400 and out["error"] == "BAD_JSON" and "deeper" in out["detail"]
    assert deliveries(app) == 0
    # The server still works afterwards.
    payload = json.dumps(issues_event("opened", REPO, 3)).encode()
    assert post(server.url + "/github/webhook", payload, github_headers("issues", payload))[0] == 200


def test_brackets_inside_strings_do_not_count_as_depth(served):
    app, server = served
    payload = issues_event("opened", REPO, 4, title="[[[[{{{{" * 100 + '\\"[[[')
    body = json.dumps(payload).encode()
    assert post(server.url + "/github/webhook", body, github_headers("issues", body))[0] == 200


def test_huge_chunked_body_without_length_is_413(served):
    app, server = served
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.putrequest("POST", "/github/webhook")
    for k, v in github_headers("issues", b"{}").items():
        conn.putheader(k, v)
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    chunk = b"[" * (1 << 20)
    try:
        for _ in range(webhook.MAX_BODY_BYTES // len(chunk) + 2):
            conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        conn.send(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server may answer and close before the whole body is sent
    assert conn.getresponse().status == 413
    conn.close()
    assert deliveries(app) == 0
