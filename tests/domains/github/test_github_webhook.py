"""POST /github/webhook on a real loopback server: signatures, replays, event routing, the IRP start."""

from __future__ import annotations

import json

import pytest
from support.github_helpers import (
    SECRET,
    RouteServer,
    comment_event,
    deliver,
    github_headers,
    issues_event,
    post,
    pull_request_event,
    signature,
    webhook_app,
)

from vantage_peers.domains.github import webhook
from vantage_peers.server import create_app

pytestmark = pytest.mark.backends

REPO = "myreeldream-ai/MyShortReel-beta"


@pytest.fixture
def served(settings):
    with webhook_app(settings) as pair:
        yield pair


def counts(app) -> dict[str, int]:
    tables = ("issues", "missions", "tasks", "githubOutbox", "githubDeliveries")
    return app.db.read(lambda c: {t: c.scalar(f"SELECT count(*) FROM {t}") for t in tables})


def map_repo(app, repo=REPO, orchestrator="dave", project="myreeldream"):
    from vantage_peers.domains.github import mappings

    app.db.write(lambda c: mappings.add(c, repo=repo, orchestrator=orchestrator, project=project, created_by=None))


def test_signature_matches_githubs_documented_example():
    # docs.github.com "Validating webhook deliveries": this secret and payload give this digest.
    body = b"Hello, World!"
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert webhook.sign(SECRET, body) == expected
    assert webhook.verify(SECRET, body, expected)
    assert not webhook.verify(SECRET, body + b" ", expected)
    assert not webhook.verify(None, body, expected)
    assert not webhook.verify(SECRET, body, None)


def test_opened_on_mapped_repo_creates_issue_mission_and_one_comment(served):
    app, server = served
    map_repo(app)
    status, out = deliver(server.url, "issues", issues_event("opened", REPO, 282))
    assert status == 200 and out["created"] and out["mapped"] and out["commentQueued"]
    issue = app.db.read(lambda c: c.one("SELECT * FROM issues WHERE issueNumber = 282"))
    assert issue["project"] == "myreeldream" and issue["status"] == "open" and issue["missionId"] == out["missionId"]
    mission = app.db.read(lambda c: c.one("SELECT * FROM missions WHERE id = ?", (out["missionId"],)))
    assert mission["pilot"] == "dave" and mission["templateId"] == "issue-resolution-v3"
    titles = app.db.read(lambda c: [r["title"] for r in c.query(
        "SELECT title FROM tasks WHERE missionId = ? ORDER BY seq", (out["missionId"],))])
    assert len(titles) == 9 and titles[0] == "[#282] T0 — Acknowledge" and titles[6].startswith("[#282] T6 — ")
    rows = app.db.read(lambda c: c.query("SELECT * FROM githubOutbox"))
    assert len(rows) == 1 and rows[0]["kind"] == "comment" and rows[0]["status"] == "pending"
    body = json.loads(rows[0]["payload"])["body"]
    assert body.startswith("Investigating - assigned to dave")
    assert body.splitlines()[-1].startswith("Orchestrator: Dave — VantageOS Team | ")
    assert f"vantage-peers:outbox:{rows[0]['id']}" in body


def test_bad_missing_or_foreign_signature_is_401_and_writes_nothing(served):
    app, server = served
    map_repo(app)
    before = counts(app)
    payload = json.dumps(issues_event("opened", REPO, 5)).encode()
    url = server.url + "/github/webhook"
    bad = "sha256=" + "0" * 64
    assert post(url, payload, github_headers("issues", payload, sig=bad))[0] == 401
    assert post(url, payload, github_headers("issues", payload, secret=None))[0] == 401
    assert post(url, payload, github_headers("issues", payload, secret="another secret"))[0] == 401
    # A body changed after signing fails too.
    signed = github_headers("issues", payload)
    assert post(url, payload.replace(b"Credits", b"Kredits"), signed)[0] == 401
    assert post(url, payload, {**signed, "X-Hub-Signature-256": "sha1=abc"})[0] == 401
    assert counts(app) == before


def test_without_a_configured_secret_every_delivery_is_refused(settings):
    app = create_app(settings.model_copy(update={"github_webhook_secret": None}))
    server = RouteServer(app)
    try:
        status, out = deliver(server.url, "issues", issues_event("opened", REPO, 5))
        assert status == 401 and "GITHUB_WEBHOOK_SECRET" in out["detail"]
        assert counts(app)["issues"] == 0
    finally:
        server.stop()
        app.db.close()


def test_replayed_delivery_changes_nothing(served):
    app, server = served
    map_repo(app)
    delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
    assert deliver(server.url, "issues", issues_event("opened", REPO, 7), delivery=delivery)[0] == 200
    after_first = counts(app)
    status, out = deliver(server.url, "issues", issues_event("opened", REPO, 7), delivery=delivery)
    assert status == 200 and out["duplicate"] is True
    assert counts(app) == after_first
    # A new delivery of the same issue event starts no second mission nor a second comment.
    assert deliver(server.url, "issues", issues_event("opened", REPO, 7))[0] == 200
    again = counts(app)
    assert (again["missions"], again["tasks"], again["githubOutbox"]) == (
        after_first["missions"], after_first["tasks"], after_first["githubOutbox"])


def test_unmapped_repo_is_recorded_and_starts_nothing(served):
    app, server = served
    status, out = deliver(server.url, "issues", issues_event("opened", "someone/else", 3))
    assert status == 200 and out["mapped"] is False
    c = counts(app)
    assert (c["issues"], c["missions"], c["tasks"], c["githubOutbox"]) == (1, 0, 0, 0)
    row = app.db.read(lambda c: c.one("SELECT * FROM issues"))
    assert row["repo"] == "someone/else" and row["project"] is None and row["mapped"] == 0


def test_unknown_event_bad_json_and_bad_payload(served):
    app, server = served
    url = server.url + "/github/webhook"
    body = b'{"zen": "Design for failure.", "hook_id": 1}'
    assert post(url, body, github_headers("ping", body))[0] == 200
    assert post(url, body, github_headers("star", body))[0] == 204
    assert deliver(server.url, "issues", issues_event("assigned", REPO, 1))[0] == 204  # unhandled action
    bad = b'{"action": "opened", "issue": '
    assert post(url, bad, github_headers("issues", bad))[0] == 400
    for payload, field in (
        ({"action": "opened", "issue": {"number": "x"}, "repository": {"full_name": REPO}}, "issue.number"),
        ({"action": "opened", "issue": {"number": 1}, "repository": {"full_name": "../../etc"}}, "full_name"),
        ({"action": "opened", "issue": {"number": -4}, "repository": {"full_name": REPO}}, "issue.number"),
        ({"action": "opened", "repository": {"full_name": REPO}}, "issue"),
    ):
        status, out = deliver(server.url, "issues", payload)
        assert status == 400 and field in out["detail"], (payload, out)
    surrogate = json.dumps(issues_event("opened", REPO, 1, title="\ud800 broken")).encode()
    status, out = post(url, surrogate, github_headers("issues", surrogate))
    assert status == 400 and "unicode" in out["detail"].lower()
    body = json.dumps(issues_event("opened", REPO, 1)).encode()
    headers = github_headers("issues", body)
    headers["X-GitHub-Delivery"] = "'; DROP TABLE issues; --"
    assert post(url, body, headers)[0] == 400
    assert counts(app)["issues"] == 0


def test_closed_reopened_comment_and_pull_request_events(served):
    app, server = served
    map_repo(app)
    deliver(server.url, "issues", issues_event("opened", REPO, 9))
    # First response: the first comment by someone other than the author.
    deliver(server.url, "issue_comment", comment_event(REPO, 9, "octocat", "2026-06-01T10:01:00Z"))
    deliver(server.url, "issue_comment", comment_event(REPO, 9, "dave", "2026-06-01T10:30:00Z"))
    row = app.db.read(lambda c: c.one("SELECT * FROM issues WHERE issueNumber = 9"))
    assert row["commentCount"] == 2 and row["firstResponseAt"] - row["openedAt"] == 30 * 60_000
    status, out = deliver(server.url, "pull_request",
                          pull_request_event("opened", REPO, 31, body="Fixes #9, see also #77", draft=True))
    assert status == 200 and out["linkedIssues"] == [9]
    row = app.db.read(lambda c: c.one("SELECT * FROM issues WHERE issueNumber = 9"))
    assert row["prStatus"] == "draft" and row["prUrl"].endswith("/pull/31")
    deliver(server.url, "pull_request_review", {
        "action": "submitted", "review": {"state": "APPROVED", "user": {"login": "carol"}},
        "pull_request": pull_request_event("opened", REPO, 31, body="")["pull_request"],
        "repository": {"full_name": REPO}})
    deliver(server.url, "pull_request", pull_request_event("closed", REPO, 31, body="", merged=True, state="closed"))
    row = app.db.read(lambda c: c.one("SELECT * FROM issues WHERE issueNumber = 9"))
    assert row["prStatus"] == "merged" and row["prReviewState"] == "approved"
    deliver(server.url, "issues", issues_event("closed", REPO, 9, state="closed"))
    assert app.db.read(lambda c: c.scalar("SELECT status FROM issues WHERE issueNumber = 9")) == "closed"
    deliver(server.url, "issues", issues_event("reopened", REPO, 9))
    row = app.db.read(lambda c: c.one("SELECT * FROM issues WHERE issueNumber = 9"))
    assert row["status"] == "open" and row["closedAt"] is None


def test_oversized_body_is_refused_before_verification(served):
    import http.client

    app, server = served
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.putrequest("POST", "/github/webhook")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("X-GitHub-Event", "issues")
    conn.putheader("X-Hub-Signature-256", signature(b"{}"))
    conn.putheader("Content-Length", str(webhook.MAX_BODY_BYTES + 1))
    conn.endheaders()
    conn.send(b"{}")
    assert conn.getresponse().status == 413
    conn.close()
    assert counts(app)["githubDeliveries"] == 0


def test_repo_slugs_are_case_blind_across_webhook_and_tasks(served):
    from conftest import open_tools

    app, server = served
    map_repo(app, repo=REPO.lower())
    with open_tools(app) as tools:
        tid = tools.call("create_task", title="Fix #12 early", assignedTo="dave", createdBy="dave", priority="low",
                         project="myreeldream")
        tools.call("complete_task", taskId=tid, completionNote="looked into it, tests/test_x.py 3 tests")
    assert deliver(server.url, "issues", issues_event("opened", REPO, 12))[0] == 200
    rows = app.db.read(lambda c: c.query("SELECT repo, linkedTaskIds, missionId FROM issues"))
    assert len(rows) == 1 and rows[0]["missionId"] and tid in rows[0]["linkedTaskIds"]
