"""GitHub-domain tools through the MCP client: lists with paging, lifecycle, mappings, deployments,
the complete_task hook and link_issue_to_pattern's issue side."""

from __future__ import annotations

import json

import pytest
from support.migration_helpers import older_file

from vantage_peers.core.ids import now_ms
from vantage_peers.domains.github import deployments, issues, mappings

pytestmark = pytest.mark.backends

REPO = "myreeldream-ai/MyShortReel-beta"


def add_issues(app, n, repo=REPO, project="myreeldream"):
    mapping = {"project": project, "orchestrator": "dave"}

    def tx(c):
        for i in range(1, n + 1):
            issues.ensure(c, repo=repo, number=i, mapping=mapping, now=now_ms(), fields={"title": f"bug {i}"})

    app.db.write(tx)


def test_list_issues_insert_n_list_n_with_paging(app, tools):
    add_issues(app, 47)
    add_issues(app, 5, repo="other/repo", project="other")
    seen, cursor, pages = [], None, 0
    while True:
        page = tools.call("list_issues", project="myreeldream", limit=10, **({"cursor": cursor} if cursor else {}))
        assert set(page) <= {"count", "issues", "nextCursor"} and page["count"] == len(page["issues"])
        seen.extend(page["issues"])
        pages += 1
        cursor = page.get("nextCursor")
        if not cursor:
            break
    assert len(seen) == 47 and len({i["_id"] for i in seen}) == 47 and pages == 5
    assert [i["issueNumber"] for i in seen[:3]] == [47, 46, 45]  # newest first
    assert tools.call("list_issues")["count"] == 20
    lite = tools.call("list_issues", fields="lite", limit=200)
    assert lite["count"] == 52 and "nextCursor" not in lite
    assert set(lite["issues"][0]) == {"_id", "_creationTime", "repo", "issueNumber", "title", "status", "project"}
    tools.call("update_issue_status", repo=REPO, issueNumber=3, status="in_progress")
    only = tools.call("list_issues", status="in_progress")
    assert only["count"] == 1 and only["issues"][0]["issueNumber"] == 3
    assert "status" in tools.error("list_issues", status="done")


def test_issue_lifecycle_and_refusals(app, tools):
    assert tools.call("get_issue", repo=REPO, issueNumber=1) is None
    add_issues(app, 1)
    assert "NOT_FOUND" in tools.error("update_issue_status", repo=REPO, issueNumber=99, status="fixed")
    err = tools.error("update_issue_status", repo=REPO, issueNumber=1, status="verified")
    assert "INVALID_STATE" in err and "in_progress, fixed, closed" in err
    assert tools.call("update_issue_status", repo=REPO, issueNumber=1, status="in_progress")["status"] == "in_progress"
    assert "INVALID_STATE" in tools.error("verify_issue", repo=REPO, issueNumber=1, verifiedBy="carol")
    fixed = tools.call("link_commit_to_issue", repo=REPO, issueNumber=1, commitSha="ABC1234", fixedBy="dave")
    assert fixed["status"] == "fixed" and fixed["commitShas"] == ["abc1234"] and fixed["fixedBy"] == "dave"
    again = tools.call("link_commit_to_issue", repo=REPO, issueNumber=1, commitSha="abc1234")
    assert again["commitShas"] == ["abc1234"]
    done = tools.call("verify_issue", repo=REPO, issueNumber=1, verifiedBy="carol")
    assert done["status"] == "verified" and done["verifiedBy"] == "carol"
    assert tools.call("update_issue_status", repo=REPO, issueNumber=1, status="closed")["status"] == "closed"
    assert "Allowed next: open" in tools.error("update_issue_status", repo=REPO, issueNumber=1, status="fixed")
    assert tools.call("get_issue", repo=REPO.upper(), issueNumber=1)["status"] == "closed"  # slugs are case-blind
    for bad in ("not a repo", "../../etc/passwd", "a/b/c", "", "x" * 300 + "/y"):
        assert "repo" in tools.error("get_issue", repo=bad, issueNumber=1)
    assert "issueNumber" in tools.error("get_issue", repo=REPO, issueNumber=0)
    assert "commitSha" in tools.error("link_commit_to_issue", repo=REPO, issueNumber=1, commitSha="xyz; rm -rf")


def test_issue_stats_counts_by_status(app, tools):
    add_issues(app, 6)
    add_issues(app, 2, repo="other/repo", project="other")
    tools.call("update_issue_status", repo=REPO, issueNumber=1, status="in_progress")
    tools.call("update_issue_status", repo=REPO, issueNumber=2, status="closed")
    tools.call("link_commit_to_issue", repo=REPO, issueNumber=3, commitSha="abcdef1")
    stats = tools.call("issue_stats", project="myreeldream")
    assert {k: stats[k] for k in ("open", "in_progress", "fixed", "verified", "closed", "total")} == {
        "open": 3, "in_progress": 1, "fixed": 1, "verified": 0, "closed": 1, "total": 6}
    every = tools.call("issue_stats")
    assert every["total"] == 8 and every["byProject"]["other"]["open"] == 2


def test_repo_mappings_crud_and_paging(app, tools):
    for i in range(33):
        tools.call("add_repo_mapping", repo=f"org/repo-{i}", orchestrator="sigma", project=f"p{i}")
    items, pages = tools.pages("list_repo_mappings", limit=7)
    assert len(items) == 33 and pages == 5 and items[0]["repo"] == "org/repo-32"  # newest first
    lite = tools.call("list_repo_mappings", fields="lite", limit=1)["items"][0]
    assert set(lite) == {"_id", "_creationTime", "repo", "orchestrator", "project"}
    full = tools.call("get_repo_mapping", repo="ORG/repo-3")
    assert full["active"] is True and full["orchestrator"] == "sigma"
    moved = tools.call("add_repo_mapping", repo="org/repo-3", orchestrator="tau", project="p3b")
    assert moved["created"] is False and moved["orchestrator"] == "tau"
    assert tools.call("remove_repo_mapping", repo="org/repo-3") == {"repo": "org/repo-3", "deleted": True}
    assert tools.call("remove_repo_mapping", repo="org/repo-3")["deleted"] is False
    assert tools.call("get_repo_mapping", repo="org/repo-3") is None
    assert len(tools.pages("list_repo_mappings", limit=200)[0]) == 32
    assert "repo" in tools.error("add_repo_mapping", repo="org/x'; DROP TABLE issues;--", orchestrator="a",
                                 project="p")
    assert tools.listed["remove_repo_mapping"].annotations.destructive_hint is True


def test_deployments_and_errors_with_paging(app, tools):
    dep = tools.call("add_deployment", name="myreeldream", deploymentUrl="https://calm-gerbil-63.convex.cloud/",
                     deployKeyEnvVar="DEPLOY_KEY_MYREELDREAM", githubRepo=REPO, orchestrator="dave")
    assert dep["created"] and dep["active"] is True and dep["deploymentUrl"] == "https://calm-gerbil-63.convex.cloud"
    again = tools.call("add_deployment", name="myreeldream", deploymentUrl="https://calm-gerbil-63.convex.cloud/",
                       deployKeyEnvVar="DEPLOY_KEY_MYREELDREAM", githubRepo=REPO, orchestrator="dave")
    assert again["created"] is False and again["deploymentId"] == dep["deploymentId"]
    for bad in ("GITHUB_TOKEN", "OPENAI_API_KEY", "deploy_key_x", "DEPLOY_KEY_X; ls"):
        assert "deployKeyEnvVar" in tools.error("add_deployment", name="x", deploymentUrl="https://a.b",
                                                deployKeyEnvVar=bad, githubRepo=REPO, orchestrator="d")
    for bad in ("file:///etc/passwd", "https://user:pw@host", "not a url", "https://h/x?cursor=1"):
        assert "deploymentUrl" in tools.error("add_deployment", name="x", deploymentUrl=bad,
                                              deployKeyEnvVar="DEPLOY_KEY_X", githubRepo=REPO, orchestrator="d")
    row = app.db.read(lambda c: c.one("SELECT * FROM monitoredDeployments"))

    def tx(c):
        claimed = deployments.claim_due(c, owner="t", now=now_ms())
        assert len(claimed) == 1
        errors = [{"functionName": f"credits:charge{i}", "errorMessage": f"boom {i}", "stackTrace": "at x"}
                  for i in range(45)]
        return deployments.record_batch(c, deployment=claimed[0], owner="t", old_cursor=0, new_cursor=5,
                                        errors=errors, now=now_ms())

    assert app.db.write(tx) == {"new": 45, "repeats": 0, "skipped": 0}
    items, pages = tools.pages("list_errors", deployment="myreeldream", limit=10)
    assert len(items) == 45 and pages == 5 and all(i["count"] == 1 for i in items)
    assert tools.call("list_errors", deployment="nope")["items"] == []
    lite = tools.call("list_errors", fields="lite", limit=1)["items"][0]
    assert set(lite) == {"_id", "_creationTime", "deployment", "functionName", "errorMessage", "count", "lastSeen"}
    one = tools.call("get_error", errorId=items[0]["_id"])
    assert one["stackTrace"] == "at x" and one["deploymentId"] == row["id"]
    assert tools.call("get_error", errorId="err_nope") is None
    # 45 new errors queued 45 [Auto] issues (one each).
    assert app.db.read(lambda c: c.scalar("SELECT count(*) FROM githubOutbox WHERE kind = 'create_issue'")) == 45
    off = tools.call("remove_deployment", name="myreeldream")
    assert off["active"] is False
    assert app.db.read(lambda c: c.scalar("SELECT count(*) FROM monitoredDeployments")) == 1
    assert "NOT_FOUND" in tools.error("remove_deployment", name="ghost")
    assert tools.call("add_deployment", name="myreeldream", deploymentUrl="https://calm-gerbil-63.convex.cloud",
                      deployKeyEnvVar="DEPLOY_KEY_MYREELDREAM", githubRepo=REPO, orchestrator="dave")["active"]


def test_complete_task_links_issue_and_queues_irp_comments(app, tools):
    tools.call("add_repo_mapping", repo=REPO, orchestrator="sigma", project="myreeldream")

    def task(title, note):
        tid = tools.call("create_task", title=title, assignedTo="sigma", createdBy="sigma", priority="high",
                         project="myreeldream")
        tools.call("complete_task", taskId=tid, completionNote=note, callerOrchestrator="sigma")
        return tid

    t3 = task("[#282] T3 — Identify Tests", "identified tests/test_credits.py, 12 tests")
    issue = tools.call("get_issue", repo=REPO, issueNumber=282)
    assert issue["linkedTaskIds"] == [t3] and issue["status"] == "open"
    assert app.db.read(lambda c: c.scalar("SELECT count(*) FROM githubOutbox")) == 0
    t6 = task("[#282] T6 — Write Missing Tests", "regression test tests/test_credits.py::test_double 1 failing")
    t8 = task("[#282] T8 — Run ALL Tests", "fixed in 9f3c2ab1, 311/311 pass")
    t11 = task("[#282] T11 — Verification Preview", "preview https://preview.example verified, deployed 77aa3bc")
    task("[#282] T6 — Write Missing Tests (again)", "second T6 task: no second comment")
    issue = tools.call("get_issue", repo=REPO, issueNumber=282)
    assert issue["linkedTaskIds"][:4] == [t3, t6, t8, t11] and issue["status"] == "fixed"
    assert issue["commitShas"] == ["9f3c2ab1", "77aa3bc"]
    assert tools.call("get_repo_mapping", repo=REPO)["lastDeployedSHA"] == "77aa3bc"
    rows = app.db.read(lambda c: c.query("SELECT * FROM githubOutbox ORDER BY seq"))
    bodies = [json.loads(r["payload"])["body"] for r in rows]
    assert [b.splitlines()[0] for b in bodies] == [
        "Bug reproduced in test suite. Root cause identified.",
        "Fix ready. All tests pass including new regression test.",
        "Fixed and deployed to production. Regression test added."]
    assert all(b.splitlines()[-1].startswith("Orchestrator: Sigma — VantageOS Team Infra | ") for b in bodies)
    # A PR link in a note starts PR monitoring of the issue (prStatus open).
    task("[#282] T9 — Create PR + Comment Issue", "opened https://github.com/get-convex/better-auth/pull/77 for it")
    issue = tools.call("get_issue", repo=REPO, issueNumber=282)
    assert issue["prUrl"] == "https://github.com/get-convex/better-auth/pull/77" and issue["prStatus"] == "open"
    # A project without a mapping links nothing.
    tid = tools.call("create_task", title="Fix #5", assignedTo="sigma", createdBy="sigma", priority="low",
                     project="elsewhere")
    tools.call("complete_task", taskId=tid, completionNote="fixed it in abcdef12", callerOrchestrator="sigma")
    assert tools.call("get_issue", repo=REPO, issueNumber=5) is None


def test_link_issue_to_pattern_records_the_issue_side(app, tools):
    add_issues(app, 2)
    pid = tools.call("create_fix_pattern", symptom="credits charged twice", rootCause="no idempotency key",
                     sourceProject="myreeldream", createdBy="dave")
    pid = pid if isinstance(pid, str) else pid.get("patternId") or pid.get("_id")
    tools.call("link_issue_to_pattern", patternId=pid, issueId=f"{REPO}#2")
    tools.call("link_issue_to_pattern", patternId=pid, issueId=f"{REPO}#2")
    assert tools.call("get_issue", repo=REPO, issueNumber=2)["linkedPatternIds"] == [pid]
    issue_id = tools.call("get_issue", repo=REPO, issueNumber=1)["_id"]
    tools.call("link_issue_to_pattern", patternId=pid, issueId=issue_id)
    assert tools.call("get_issue", repo=REPO, issueNumber=1)["linkedPatternIds"] == [pid]
    tools.call("link_issue_to_pattern", patternId=pid, issueId="unknown/repo#1")  # pattern side only
    assert "NOT_FOUND" in tools.error("link_issue_to_pattern", patternId="fxp_nope", issueId=f"{REPO}#1")
    assert tools.call("get_issue", repo=REPO, issueNumber=1)["linkedPatternIds"] == [pid]


def test_mapping_store_is_newest_first(app):
    for i in range(3):
        app.db.write(lambda c, i=i: mappings.add(c, repo=f"o/r{i}", orchestrator="x", project="p", created_by=None))
    page = app.db.read(lambda c: mappings.list_mappings(c, limit=2, cursor=None, fields="full"))
    assert [m["repo"] for m in page["items"]] == ["o/r2", "o/r1"] and page["nextCursor"]


def test_upgrade_from_an_older_file_keeps_its_data(tmp_path):
    from vantage_peers.db import Database, current_version, latest_version, migrate

    path = older_file(tmp_path / "old.db", 5,
                      "INSERT INTO fixPatterns (id, symptom, rootCause, tags, stack, sourceProject, createdBy, "
                      "createdAt, updatedAt) VALUES ('fxp_1', 's', 'r', '[]', '[]', 'p', 'dave', 1, 1)",
                      "INSERT INTO messages (id, sender, channel, content, createdAt) "
                      "VALUES ('msg_1', 'a', 'b', 'old', 1)",
                      "INSERT INTO messageReceipts (id, messageId, recipient, createdAt) "
                      "VALUES ('rcp_1', 'msg_1', 'b', 1)")
    db = Database(path)
    assert migrate(db) == latest_version() == current_version(db) >= 10
    assert db.read(lambda c: c.scalar("SELECT symptom FROM fixPatterns WHERE id = 'fxp_1'")) == "s"
    assert db.read(lambda c: c.scalar("SELECT count(*) FROM githubRepoMapping")) == 0
    # 012_delivery: an old receipt is a plain delivered receipt (no acknowledgement awaited).
    assert db.read(lambda c: c.one("SELECT readAt, ackRequired, deliveryAttempt, nextDeliveryAt FROM "
                                   "messageReceipts WHERE id = 'rcp_1'")) == {
        "readAt": None, "ackRequired": 0, "deliveryAttempt": 1, "nextDeliveryAt": None}
    db.close()


def test_upgrade_to_leases_keeps_tasks_and_claims_them(tmp_path):
    """Migration 013 (leases) on a file at version 10 with a task in progress: the task survives,
    and can be claimed, noted and expired on the upgraded file."""
    from vantage_peers.db import Database, current_version, latest_version, migrate
    from vantage_peers.domains.leases import sweep
    from vantage_peers.domains.tasks import claims, lifecycle

    path = older_file(tmp_path / "old10.db", 10,
                      "INSERT INTO tasks (id, title, assignedTo, priority, status, createdBy, createdAt, updatedAt) "
                      "VALUES ('tsk_old', 'kept', 'bob', 'low', 'todo', 'alice', 1, 1)")
    db = Database(path)
    assert db.read(lambda c: c.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'agentLeases'")) == 0
    assert migrate(db) == latest_version() == current_version(db) >= 13
    assert db.read(lambda c: c.scalar("SELECT title FROM tasks WHERE id = 'tsk_old'")) == "kept"
    won = db.write(lambda c: lifecycle.checkout_task(c, task_id="tsk_old", caller="bob", instance=None, now=1000,
                                                     ttl=5000))
    assert won == {"claimed": True, "leaseExpiresAt": 6000, "fencingToken": 1}
    assert len(db.write(lambda c: sweep.expire_due(c, now=6000))) == 1
    assert db.read(lambda c: c.scalar("SELECT status FROM tasks WHERE id = 'tsk_old'")) == "todo"
    assert db.read(lambda c: claims.notes_of(c, "tsk_old"))[0]["content"].startswith("[auto]")
    db.close()


GITHUB_TOOLS = {
    "list_issues": {}, "get_issue": {"repo": REPO, "issueNumber": 1},
    "update_issue_status": {"repo": REPO, "issueNumber": 1, "status": "closed"},
    "link_commit_to_issue": {"repo": REPO, "issueNumber": 1, "commitSha": "abc1234"},
    "verify_issue": {"repo": REPO, "issueNumber": 1, "verifiedBy": "carol"}, "issue_stats": {},
    "add_repo_mapping": {"repo": REPO, "orchestrator": "dave", "project": "p"}, "list_repo_mappings": {},
    "get_repo_mapping": {"repo": REPO}, "remove_repo_mapping": {"repo": "o/r"},
    "add_deployment": {"name": "d", "deploymentUrl": "https://x.convex.cloud", "deployKeyEnvVar": "DEPLOY_KEY_D",
                       "githubRepo": REPO, "orchestrator": "dave"},
    "remove_deployment": {"name": "d"}, "list_errors": {}, "get_error": {"errorId": "err_1"},
}
HOSTILE = ["'; DROP TABLE issues; --", "../../etc/passwd", "\x00\x01", "🚀 日本語", "a" * 100_000, "%_\\", "\ud800"]


def test_hostile_values_give_a_result_or_a_clean_error(app, tools):
    from conftest import ToolError

    add_issues(app, 1)
    strings = {"project", "repo", "status", "commitSha", "fixedBy", "verifiedBy", "orchestrator", "name",
               "deploymentUrl", "deployKeyEnvVar", "githubRepo", "deployment", "errorId", "cursor", "fields"}
    for name, base in GITHUB_TOOLS.items():
        props = set(tools.listed[name].input_schema["properties"]) & strings
        for prop in props:
            for value in [*HOSTILE, 12345, ["x"]]:
                try:
                    tools.call(name, **{**base, prop: value})
                except ToolError as err:
                    text = str(err)
                    assert "INVALID_ARGUMENT" in text or "NOT_FOUND" in text or "INVALID_STATE" in text, (
                        name, prop, str(value)[:40], text[:200])
    assert app.db.read(lambda c: c.scalar("SELECT count(*) FROM issues")) == 1
