"""The outbox sender and the monitors against a fake GitHub API and a fake Convex log endpoint (loopback)."""

from __future__ import annotations

import json
import time

import pytest
from conftest import make_settings, open_tools
from support.github_helpers import DEPLOY_KEY, TOKEN, FakeConvexLogs, FakeGitHub
from support.paths import SUPPORT

from vantage_peers.core.ids import now_ms
from vantage_peers.domains.github import irp, issues, mappings, monitors, outbox
from vantage_peers.domains.github.sender import Sender
from vantage_peers.pipeline.scheduler import Scheduler
from vantage_peers.server import create_app

pytestmark = pytest.mark.backends

REPO = "myreeldream-ai/MyShortReel-beta"


@pytest.fixture
def github():
    fake = FakeGitHub()
    yield fake
    fake.stop()


@pytest.fixture
def gapp(settings, github):
    app = create_app(settings.model_copy(update={"github_token": TOKEN, "github_api_url": github.url,
                                                 "github_retry_seconds": 0.05}))
    yield app
    app.db.close()


def queue_comments(app, n, number=282):
    mapping = {"project": "p", "orchestrator": "sigma", "repo": REPO}

    def tx(c):
        issues.ensure(c, repo=REPO, number=number, mapping=mapping, now=now_ms())
        for step in (0, 6, 8, 11)[:n]:
            irp.queue_comment(c, repo=REPO, number=number, step=step, orchestrator="sigma", now=now_ms())

    app.db.write(tx)


def drain(sender, rounds=200):
    for _ in range(rounds):
        sender.run()
        if sender.app.db.read(outbox.pending_count) == 0:
            return
        time.sleep(0.02)
    raise AssertionError("outbox did not drain")


def test_flaky_github_still_gets_exactly_one_comment_each(gapp, github):
    github.fail_new = 2  # every distinct comment: 500, 500, then 201
    queue_comments(gapp, 4)
    drain(Sender(gapp))
    bodies = [c["body"] for c in github.all_comments()]
    assert len(bodies) == 4 and len(set(bodies)) == 4
    assert sum(1 for m, _ in github.requests if m == "POST") == 12  # 2 failures + 1 success each
    rows = gapp.db.read(lambda c: c.query("SELECT * FROM githubOutbox"))
    assert all(r["status"] == "sent" and r["attempts"] == 3 and r["lastStatus"] == 201 for r in rows)
    # The retries after a 500 looked for the marker first (the attempt may have reached GitHub).
    assert sum(1 for m, p in github.requests if m == "GET" and p.endswith("/comments")) == 8


def test_comments_on_one_issue_keep_their_order_when_the_first_is_retried(gapp, github):
    """A 500 on the first comment must not let the later ones overtake it (the thread reads in order)."""
    github.fail_posts = 1
    queue_comments(gapp, 4)
    queue_comments(gapp, 1, number=283)  # another issue is not held back by 282's retry
    sender = Sender(gapp)
    sender.run()
    first = [c["body"].splitlines()[0] for c in github.comments.get((REPO, 282), [])]
    assert first == [] and len(github.comments.get((REPO, 283), [])) == 1
    drain(sender)
    first = [c["body"].splitlines()[0] for c in github.comments[(REPO, 282)]]
    assert first == ["Investigating - assigned to sigma", "Bug reproduced in test suite. Root cause identified.",
                     "Fix ready. All tests pass including new regression test.",
                     "Fixed and deployed to production. Regression test added."]


def test_no_token_sends_nothing(settings, github):
    app = create_app(settings.model_copy(update={"github_token": None, "github_api_url": github.url}))
    try:
        queue_comments(app, 2)
        out = Sender(app).run()
        assert out["skipped"] == "GITHUB_TOKEN is not set" and out["pending"] == 2
        assert github.requests == []
    finally:
        app.db.close()


@pytest.mark.slow
def test_rate_limit_headers_pause_every_sender(gapp, github):
    queue_comments(gapp, 2)
    github.rate_limits = ["exhausted"]
    before = now_ms()
    out = Sender(gapp).run()
    assert out.get("rate_limited") == 1 and github.all_comments() == []
    until = gapp.db.read(outbox.rate_limited_until)
    assert until > before  # X-RateLimit-Reset is the next second
    # Another process's sender honours the same window without calling GitHub.
    calls = len(github.requests)
    assert "rateLimitedUntil" in Sender(gapp).run(now=until - 1)
    assert len(github.requests) == calls
    rows = gapp.db.read(lambda c: c.query("SELECT * FROM githubOutbox ORDER BY seq"))
    assert [r["status"] for r in rows] == ["pending", "pending"] and rows[0]["lastError"].startswith("RATE_LIMITED")
    assert rows[1]["leaseOwner"] is None and rows[1]["attempts"] == 0  # handed back untouched
    github.rate_limits = ["retry-after"]
    time.sleep(max(0, (until - now_ms()) / 1000) + 0.05)
    before = now_ms()
    Sender(gapp).run()
    assert gapp.db.read(outbox.rate_limited_until) >= before + 1000  # Retry-After: 1
    time.sleep(1.1)
    drain(Sender(gapp))
    assert len(github.all_comments()) == 2


def test_permanent_refusal_fails_the_row_with_the_reason(settings, github):
    app = create_app(settings.model_copy(update={"github_token": "wrong-token", "github_api_url": github.url}))
    try:
        queue_comments(app, 1)
        assert Sender(app).run()["failed"] == 1
        row = app.db.read(lambda c: c.one("SELECT * FROM githubOutbox"))
        assert row["status"] == "failed" and row["lastStatus"] == 401 and "Bad credentials" in row["lastError"]
        assert Sender(app).run() == {"sent": 0, "retry": 0, "failed": 0}  # never retried
    finally:
        app.db.close()


def test_senders_racing_in_threads_on_separate_handles_post_each_comment_once(gapp, github, settings):
    """Four senders, each with its own app (its own connections, as four processes would have), drain one
    outbox at once against a flaky GitHub: every comment is posted exactly once (a claim is one
    conditional UPDATE; on PostgreSQL two overlapping claims cannot both commit)."""
    import threading

    github.fail_new = 1
    for number in range(300, 306):
        queue_comments(gapp, 4, number=number)
    apps = [create_app(settings.model_copy(update={"github_token": TOKEN, "github_api_url": github.url,
                                                   "github_retry_seconds": 0.05})) for _ in range(4)]
    gate, errors = threading.Barrier(len(apps)), []

    def work(app):
        try:
            gate.wait()
            sender = Sender(app)
            for _ in range(400):
                sender.run(batch=3)
                if app.db.read(outbox.pending_count) == 0:
                    return
                time.sleep(0.01)
            errors.append("outbox did not drain")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(a,)) for a in apps]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        for a in apps:
            a.db.close()
    assert errors == []
    with github.lock:
        per_issue = {key: [c["body"] for c in items] for key, items in github.comments.items()}
    assert len(per_issue) == 6 and all(len(b) == 4 and len(set(b)) == 4 for b in per_issue.values()), per_issue
    assert gapp.db.read(lambda c: c.scalar("SELECT count(*) FROM githubOutbox WHERE status = 'sent'")) == 24


def test_a_send_whose_outcome_was_lost_is_not_repeated(gapp, github):
    """A sender that posted and died before recording it: the next one finds the marker, posts nothing."""
    queue_comments(gapp, 1)
    sender = Sender(gapp)
    row = gapp.db.write(lambda c: outbox.claim(c, owner="dead-process", now=now_ms()))[0]
    sender.client().comment(row["repo"], row["issueNumber"], row["payload"]["body"])  # it reached GitHub…
    # …and the process died: its lease lapses.
    gapp.db.write(lambda c: c.execute("UPDATE githubOutbox SET leaseUntil = 0"))
    drain(sender)
    assert len(github.all_comments()) == 1
    assert gapp.db.read(lambda c: c.scalar("SELECT maybeSent FROM githubOutbox")) == 1


def test_same_error_five_times_files_one_auto_issue_with_count_five(gapp, github, monkeypatch):
    logs = FakeConvexLogs()
    monkeypatch.setenv("DEPLOY_KEY_MYREELDREAM", DEPLOY_KEY)
    try:
        with open_tools(gapp) as tools:
            tools.call("add_deployment", name="myreeldream", deploymentUrl=logs.url,
                       deployKeyEnvVar="DEPLOY_KEY_MYREELDREAM", githubRepo=REPO, orchestrator="dave")
            for _ in range(3):
                logs.add_error("credits.js:charge", "Credits insufficient for user")
            logs.add_success("credits.js:balance")
            assert monitors.run_error_monitor(gapp)["new"] == 1
            for _ in range(2):
                logs.add_error("credits.js:charge", "Credits insufficient for user")
            logs.add_error("packs.js:buy", "Stripe timeout")
            assert monitors.run_error_monitor(gapp) == {"deployments": 1, "new": 1, "repeats": 2, "errors": []}
            drain(Sender(gapp))
            drain(Sender(gapp))
            errors = tools.call("list_errors", deployment="myreeldream")["items"]
            by_fn = {e["functionName"]: e for e in errors}
            assert by_fn["credits.js:charge"]["count"] == 5 and by_fn["packs.js:buy"]["count"] == 1
            created = github.all_issues()
            assert len(created) == 2
            auto = next(i for i in created if "credits.js:charge" in i["title"])
            assert auto["title"] == "[Auto] credits.js:charge: Uncaught Error: Credits insufficient for user"
            assert [lb["name"] for lb in auto["labels"]] == ["bug", "auto-detected"]
            assert "at handler (../convex/credits.js:42:11)" in auto["body"]
            assert by_fn["credits.js:charge"]["githubIssueNumber"] == auto["number"]
            assert logs.calls[0].endswith("cursor=0") and "cursor=0" not in logs.calls[1]
            # No new logs: nothing changes; a wrong key is recorded on the deployment, not raised.
            assert monitors.run_error_monitor(gapp)["new"] == 0
            logs.key = "rotated"
            out = monitors.run_error_monitor(gapp)
            assert "401" in out["errors"][0]
            assert len(github.all_issues()) == 2
    finally:
        logs.stop()


def test_error_monitor_without_the_key_variable_reports_it(gapp, monkeypatch):
    monkeypatch.delenv("DEPLOY_KEY_NOPE", raising=False)
    with open_tools(gapp) as tools:
        tools.call("add_deployment", name="n", deploymentUrl="http://127.0.0.1:9", deployKeyEnvVar="DEPLOY_KEY_NOPE",
                   githubRepo=REPO, orchestrator="dave")
    out = monitors.run_error_monitor(gapp)
    assert "DEPLOY_KEY_NOPE is not set" in out["errors"][0]
    assert "DEPLOY_KEY_NOPE" in gapp.db.read(lambda c: c.scalar("SELECT lastError FROM monitoredDeployments"))


def test_pr_monitor_moves_merged_and_closed_and_messages_the_orchestrator(gapp, github):
    gapp.db.write(lambda c: mappings.add(c, repo=REPO, orchestrator="zeta", project="p", created_by=None))

    def tx(c):
        for n, pr in ((1, 11), (2, 12), (3, 13)):
            issues.ensure(c, repo=REPO, number=n, mapping=None, now=now_ms(), fields={
                "prUrl": f"https://github.com/get-convex/better-auth/pull/{pr}", "prStatus": "open",
                "externalRepo": "get-convex/better-auth"})

    gapp.db.write(tx)
    github.pulls[("get-convex/better-auth", 11)] = {"number": 11, "state": "closed", "merged": True}
    github.pulls[("get-convex/better-auth", 12)] = {"number": 12, "state": "closed", "merged": False}
    github.pulls[("get-convex/better-auth", 13)] = {"number": 13, "state": "open", "merged": False, "draft": True}
    assert monitors.run_pr_monitor(gapp)["queued"] == 3
    assert monitors.run_pr_monitor(gapp)["queued"] == 0  # once per issue and hour
    drain(Sender(gapp))
    status = gapp.db.read(lambda c: {r["issueNumber"]: r["prStatus"] for r in c.query(
        "SELECT issueNumber, prStatus FROM issues")})
    assert status == {1: "merged", 2: "closed", 3: "draft"}
    msgs = gapp.db.read(lambda c: c.query("SELECT m.content, r.recipient FROM messages m JOIN messageReceipts r "
                                          "ON r.messageId = m.id ORDER BY m.seq"))
    assert [m["recipient"] for m in msgs] == ["zeta", "zeta"]
    assert "was merged" in msgs[0]["content"] and "closed without merge" in msgs[1]["content"]


def test_issue_stats_job_upserts_one_row_per_repo_and_day(gapp):
    gapp.db.write(lambda c: mappings.add(c, repo=REPO, orchestrator="dave", project="p", created_by=None))
    pivot = monitors.PIVOT_MS

    def tx(c):
        for n, opened, first, closed in ((1, pivot - 10 * 86_400_000, None, pivot - 6 * 86_400_000),
                                         (2, pivot + 60_000, pivot + 120_000, pivot + 60_000 + 28 * 60_000),
                                         (3, pivot + 600_000, pivot + 660_000, None)):
            issues.ensure(c, repo=REPO, number=n, mapping=None, now=now_ms(), fields={
                "openedAt": opened, "firstResponseAt": first, "closedAt": closed})

    gapp.db.write(tx)
    gapp.db.write(lambda c: c.execute("INSERT INTO githubDeliveries VALUES ('old', 'issues', 'opened', ?, 1), "
                                      "('new', 'issues', 'opened', ?, ?)", (REPO, REPO, now_ms())))
    assert monitors.run_issue_stats(gapp) == {"day": monitors.utc_day(now_ms()), "repos": 1, "deliveriesPruned": 1}
    assert monitors.run_issue_stats(gapp)["repos"] == 1
    rows = gapp.db.read(lambda c: c.query("SELECT * FROM issueStats"))
    assert len(rows) == 1
    row = rows[0]
    assert (row["totalIssues"], row["resolvedIssues"], row["medianTimeToFirstResponse"]) == (3, 2, 1.0)
    assert row["fastestResolution"] == 28.0 and row["slowestResolution"] == 4 * 1440.0
    assert json.loads(row["beforeVantageOS"]) == {"totalIssues": 1, "resolvedIssues": 1, "medianTimeToFix": 5760.0}
    assert json.loads(row["afterVantageOS"]) == {"totalIssues": 2, "resolvedIssues": 1, "medianTimeToFix": 28.0}


def test_jobs_run_through_the_scheduler(gapp, github):
    queue_comments(gapp, 1)
    results = Scheduler(gapp).run_once({"github.outbox", "github.pr_monitor", "github.issue_stats",
                                        "github.error_monitor"})
    assert results["github.outbox"]["sent"] == 1 and len(github.all_comments()) == 1
    assert set(results) == {"github.outbox", "github.pr_monitor", "github.issue_stats", "github.error_monitor"}
    assert not any(isinstance(v, Exception) for v in results.values())


@pytest.mark.slow
def test_several_processes_file_one_auto_issue_and_count_each_error_once(settings, github, monkeypatch):
    """Three OS processes poll one deployment and drain the outbox at the same time."""
    import os
    import subprocess
    import sys

    logs = FakeConvexLogs()
    try:
        setup = create_app(settings)
        with open_tools(setup) as tools:
            tools.call("add_deployment", name="prod", deploymentUrl=logs.url, deployKeyEnvVar="DEPLOY_KEY_PROD",
                       githubRepo=REPO, orchestrator="dave")
        setup.db.close()
        for _ in range(5):
            logs.add_error("credits.js:charge", "Credits insufficient for user")
        env = {**os.environ, "VP_DB_PATH": str(settings.db_path), "GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": github.url,
               "DEPLOY_KEY_PROD": DEPLOY_KEY, "VP_SCHEDULER": "off", "VP_EMBEDDINGS": "none"}
        env.pop("VP_DATABASE_URL", None)
        if settings.database_url:  # the same PostgreSQL database in every worker
            env["VP_DATABASE_URL"] = settings.database_url
        worker = SUPPORT / "github_race_worker.py"
        start_at = str(time.time() + 3)
        procs = [subprocess.Popen([sys.executable, str(worker), start_at], env=env, stderr=subprocess.PIPE)
                 for _ in range(3)]
        for p in procs:
            assert p.wait(120) == 0, p.stderr.read().decode()
        check = create_app(settings)
        rows = check.db.read(lambda c: c.query("SELECT count, githubIssueNumber FROM errorLogs"))
        queued = check.db.read(lambda c: c.scalar("SELECT count(*) FROM githubOutbox WHERE kind = 'create_issue'"))
        check.db.close()
        assert rows == [{"count": 5, "githubIssueNumber": 1}] and queued == 1
        assert len(github.all_issues()) == 1
    finally:
        logs.stop()


def test_tool_calls_never_call_github_themselves(gapp, github):
    with open_tools(gapp) as tools:
        tools.call("add_repo_mapping", repo=REPO, orchestrator="sigma", project="p")
        tid = tools.call("create_task", title="[#3] T8 — Run ALL Tests", assignedTo="sigma", createdBy="sigma",
                         priority="high", project="p")
        tools.call("complete_task", taskId=tid, completionNote="311/311 tests pass, commit 9f3c2ab1")
        assert github.requests == [] and gapp.db.read(outbox.pending_count) == 1
    assert Sender(gapp).run()["sent"] == 1 and len(github.all_comments()) == 1


def test_doctor_says_whether_github_calls_can_be_sent(db_path, github):
    import io

    from vantage_peers.doctor import run_doctor

    out = io.StringIO()
    run_doctor(make_settings(db_path, github_token=None, github_webhook_secret=None), out=out)
    text = out.getvalue()
    assert "GITHUB_TOKEN is not set: nothing is sent to GitHub" in text and "GITHUB_WEBHOOK_SECRET is not set" in text
    out = io.StringIO()
    run_doctor(make_settings(db_path, github_token=TOKEN, github_api_url=github.url, github_webhook_secret="s"),
               out=out)
    assert f"GITHUB_TOKEN set; API {github.url}" in out.getvalue() and "GITHUB_TOKEN = set" in out.getvalue()


def test_log_entries_with_odd_values_are_parsed_safely():
    body = {"newCursor": 12.5, "entries": [
        {"kind": "Progress", "identifier": "a:b", "error": "not final"},
        {"kind": "Completion", "identifier": "a:\ud800", "error": "Uncaught \ud800 boom\n at x", "timestamp": "x",
         "logLines": [{"messages": ["m1", "m2"], "level": "ERROR"}, 5]},
        {"kind": "Completion", "identifier": "ok", "error": None}, "junk", {"error": "   "},
    ]}
    errors, cursor = monitors.parse_entries(body)
    assert cursor == 12.5 and len(errors) == 1
    assert errors[0]["functionName"] == "a:?" and errors[0]["errorMessage"] == "Uncaught ? boom"
    assert "m1 m2" in errors[0]["stackTrace"] and errors[0]["seenAt"] is None
    assert monitors.parse_entries({"entries": "nope"}) == ([], None)
    assert monitors.parse_entries([1, 2]) == ([], None)
