"""Lifecycle, RBAC and cancel rules through the MCP tools."""

from __future__ import annotations

import pytest
from support.tasks_helpers import mission, task

pytestmark = pytest.mark.backends


def seg_start(app, tid, minutes_ago):
    """Backdate the open segment (tests never sleep)."""
    app.db.write(lambda c: c.execute(
        "UPDATE taskSegments SET startedAt = startedAt - ? WHERE taskId = ? AND endedAt IS NULL",
        (minutes_ago * 60_000, tid)))


def test_start_pause_resume_complete(tools):
    tid = task(tools)
    assert tools.call("start_task", taskId=tid, callerOrchestrator="sigma") is None
    doc = tools.call("get_task", taskId=tid)
    assert doc["status"] == "in_progress" and len(doc["workSegments"]) == 1 and "endedAt" not in doc["workSegments"][0]
    err = tools.error("start_task", taskId=tid)
    assert "INVALID_STATE" in err and "pause_task" in err and "resume_task" in err
    assert "not paused" in tools.error("resume_task", taskId=tid)
    assert tools.call("pause_task", taskId=tid) is None
    doc = tools.call("get_task", taskId=tid)
    assert doc["status"] == "todo" and doc["paused"] is True and doc["assignedTo"] == "sigma"
    assert "already paused" in tools.error("pause_task", taskId=tid)
    claim = tools.call("checkout_task", taskId=tid, callerOrchestrator="tau")
    assert claim["claimed"] is False and "paused" in claim["reason"]
    assert tools.call("resume_task", taskId=tid) is None
    doc = tools.call("get_task", taskId=tid)
    assert doc["status"] == "in_progress" and doc["paused"] is False and len(doc["workSegments"]) == 2
    assert "completionNote" in tools.error("complete_task", taskId=tid, completionNote="")
    assert "completionNote" in tools.error("complete_task", taskId=tid)
    assert tools.call("complete_task", taskId=tid, completionNote="Done; PR #4 merged") is None
    doc = tools.call("get_task", taskId=tid)
    assert doc["status"] == "done" and doc["completedAt"] >= doc["startedAt"] and "actualMinutes" in doc
    assert all("endedAt" in s for s in doc["workSegments"])
    assert "already done" in tools.error("complete_task", taskId=tid, completionNote="again")
    assert "cannot be started" in tools.error("start_task", taskId=tid)


def test_pause_without_segment_and_resume_todo(tools):
    tid = task(tools)
    assert "no open work segment" in tools.error("pause_task", taskId=tid)
    err = tools.error("resume_task", taskId=tid)
    assert "not paused" in err and "start_task" in err


def test_start_on_paused_task_resumes(tools):
    tid = task(tools)
    tools.call("start_task", taskId=tid)
    started = tools.call("get_task", taskId=tid)["startedAt"]
    tools.call("pause_task", taskId=tid)
    tools.call("start_task", taskId=tid)
    doc = tools.call("get_task", taskId=tid)
    assert doc["startedAt"] == started and doc["paused"] is False and len(doc["workSegments"]) == 2


def test_caller_with_running_task_cannot_start_another(tools):
    a, b = task(tools), task(tools)
    tools.call("start_task", taskId=a, callerOrchestrator="sigma")
    assert a in tools.error("start_task", taskId=b, callerOrchestrator="sigma")
    tools.call("pause_task", taskId=a)
    assert tools.call("start_task", taskId=b, callerOrchestrator="sigma") is None
    assert b in tools.error("resume_task", taskId=a, callerOrchestrator="sigma")


def test_long_segment_refusal_names_segment(app, tools):
    tid = task(tools)
    tools.call("start_task", taskId=tid)
    seg_start(app, tid, 9 * 60)
    err = tools.error("complete_task", taskId=tid, completionNote="finished, commit abc1234")
    assert "work segment #1" in err and "480-minute" in err and "update_task" in err
    assert tools.call("get_task", taskId=tid)["status"] == "in_progress"


def test_checkout_claims_and_opens_segment(tools):
    tid = task(tools)
    won = tools.call("checkout_task", taskId=tid, callerOrchestrator="tau", callerInstance="tau-2")
    assert won["claimed"] is True and won["fencingToken"] == 1 and won["leaseExpiresAt"] > 0  # + the claim lease
    doc = tools.call("get_task", taskId=tid)
    assert (doc["assignedTo"], doc["assignedToInstance"], doc["status"]) == ("tau", "tau-2", "in_progress")
    assert doc["workSegments"][0]["orchestrator"] == "tau"
    lost = tools.call("checkout_task", taskId=tid, callerOrchestrator="phi")
    assert lost["claimed"] is False and lost["reason"]
    assert "callerOrchestrator is required" in tools.error("checkout_task", taskId=tid)


def test_block_and_unblock(tools):
    tid = task(tools, status="in_progress")
    assert "reason" in tools.error("block_task", taskId=tid, reason=" ")
    assert tools.call("block_task", taskId=tid, reason="waiting on pi for the key") is None
    doc = tools.call("get_task", taskId=tid)
    assert doc["status"] == "blocked" and doc["blockedBy"] == "waiting on pi for the key"
    assert all("endedAt" in s for s in doc["workSegments"])
    tools.call("start_task", taskId=tid)
    doc = tools.call("get_task", taskId=tid)
    assert doc["status"] == "in_progress" and "blockedBy" not in doc


def test_update_rbac(tools):
    tid = task(tools)  # created by pi, assigned to sigma
    assert "RBAC_DENIED" in tools.error("update_task", taskId=tid, title="x", callerOrchestrator="tau")
    tools.call("update_task", taskId=tid, title="by creator", callerOrchestrator="pi")
    tools.call("update_task", taskId=tid, title="by assignee", callerOrchestrator="sigma")
    tools.call("update_task", taskId=tid, title="by system", callerOrchestrator="system")
    tools.call("update_task", taskId=tid, title="no caller: no check")
    for tool in ("start_task", "pause_task", "resume_task"):
        assert "RBAC_DENIED" in tools.error(tool, taskId=tid, callerOrchestrator="tau")
    assert "RBAC_DENIED" in tools.error("complete_task", taskId=tid, completionNote="n", callerOrchestrator="tau")
    assert "RBAC_DENIED" in tools.error("block_task", taskId=tid, reason="r", callerOrchestrator="tau")
    other = task(tools)
    assert "RBAC_DENIED" in tools.error("add_task_dependency", taskId=tid, dependsOn=other, callerOrchestrator="tau")


def test_cancel_rules(tools):
    tid = task(tools)
    assert "cancelReason is required" in tools.error("update_task", taskId=tid, status="cancelled",
                                                    callerOrchestrator="pi")
    assert "RBAC_DENIED" in tools.error("update_task", taskId=tid, status="cancelled", cancelReason="r",
                                        callerOrchestrator="sigma")  # the assignee may not cancel
    assert "callerOrchestrator is required" in tools.error("update_task", taskId=tid, status="cancelled",
                                                           cancelReason="r")
    assert "only used together" in tools.error("update_task", taskId=tid, cancelReason="r")
    tools.call("update_task", taskId=tid, status="cancelled", cancelReason="wrong project", callerOrchestrator="pi")
    doc = tools.call("get_task", taskId=tid)
    assert doc["status"] == "cancelled" and doc["cancelReason"] == "wrong project"
    assert "terminal" in tools.error("update_task", taskId=tid, status="todo")
    assert "cancelled" in tools.error("complete_task", taskId=tid, completionNote="n")
    for alias in ("open", "active"):
        assert tid not in {i["_id"] for i in tools.call("list_tasks", status=alias)["items"]}
    done = task(tools)
    tools.call("complete_task", taskId=done, completionNote="finished, tests 12/12")
    err = tools.error("update_task", taskId=done, status="cancelled", cancelReason="r", callerOrchestrator="pi")
    assert "INVALID_STATE" in err and "cannot be cancelled" in err
    system_cancel = task(tools)
    tools.call("update_task", taskId=system_cancel, status="cancelled", cancelReason="r", callerOrchestrator="system")


def test_update_status_transitions_follow_lifecycle(tools):
    tid = task(tools)
    tools.call("update_task", taskId=tid, status="in_progress")
    assert len(tools.call("get_task", taskId=tid)["workSegments"]) == 1
    tools.call("update_task", taskId=tid, status="review", completionNote="ready for review")
    doc = tools.call("get_task", taskId=tid)
    assert doc["status"] == "review" and "endedAt" in doc["workSegments"][0]
    tools.call("update_task", taskId=tid, status="done")  # note already stored
    doc = tools.call("get_task", taskId=tid)
    assert doc["status"] == "done" and doc["completionNote"] == "ready for review" and "completedAt" in doc
    assert "cannot be moved" in tools.error("update_task", taskId=tid, status="todo")
    other = task(tools)
    assert "completionNote" in tools.error("update_task", taskId=other, status="done")


def test_update_todo_releases_pause(tools):
    tid = task(tools)
    tools.call("start_task", taskId=tid)
    tools.call("pause_task", taskId=tid)
    tools.call("update_task", taskId=tid, status="todo", callerOrchestrator="sigma")
    assert tools.call("get_task", taskId=tid)["paused"] is False
    assert tools.call("checkout_task", taskId=tid, callerOrchestrator="tau")["claimed"] is True


def test_add_dependency_tool(tools):
    a, b = task(tools), task(tools)
    assert tools.call("add_task_dependency", taskId=b, dependsOn=a) == {"taskId": b, "dependsOn": [a]}
    assert tools.call("add_task_dependency", taskId=b, dependsOn=a)["dependsOn"] == [a]  # no duplicate
    assert "CONFLICT" in tools.error("add_task_dependency", taskId=a, dependsOn=b)
    assert "NOT_FOUND" in tools.error("add_task_dependency", taskId=a, dependsOn="tsk_missing")
    doc = tools.call("get_task", taskId=b)
    assert doc["openDependencies"] == [a] and doc["dependencies"][0]["status"] == "todo"
    assert "CONFLICT" in tools.error("update_task", taskId=a, dependsOn=[b])


def test_completing_last_task_completes_mission(tools):
    m = mission(tools)
    a, b = task(tools, missionId=m), task(tools, missionId=m)
    tools.call("complete_task", taskId=a, completionNote="first, commit abc1234")
    from support.tasks_helpers import call
    assert call(tools, "get_mission", {"missionId": m})["status"] == "plan"
    tools.call("complete_task", taskId=b, completionNote="second, commit def5678")
    got = call(tools, "get_mission", {"missionId": m})
    assert got["status"] == "complete" and got["taskCounts"]["done"] == 2


def test_mission_completion_does_not_depend_on_order(tools):
    """Cancelled tasks never block completion, whether they are cancelled before or after the last
    done task; deleting the last open task counts too."""
    m = mission(tools)
    a, b = task(tools, missionId=m), task(tools, missionId=m)
    tools.call("complete_task", taskId=a, completionNote="done, commit abc1234")
    tools.call("update_task", taskId=b, status="cancelled", cancelReason="duplicate", callerOrchestrator="pi")
    assert tools.call("get_mission", missionId=m)["status"] == "complete"
    m2 = mission(tools)
    c, d = task(tools, missionId=m2), task(tools, missionId=m2)
    tools.call("complete_task", taskId=c, completionNote="done, commit abc1234")
    assert tools.call("delete_task", taskId=d, callerOrchestrator="pi") == {"deleted": True}
    assert tools.call("get_mission", missionId=m2)["status"] == "complete"
    m3 = mission(tools)
    e, f = task(tools, missionId=m3), task(tools, missionId=m3)
    tools.call("complete_task", taskId=e, completionNote="done, commit abc1234")
    tools.call("update_task", taskId=f, missionId=m, callerOrchestrator="pi")  # the last open task moves away
    assert tools.call("get_mission", missionId=m3)["status"] == "complete"


def test_update_to_done_keeps_explicit_completed_at(tools):
    tid = task(tools)
    tools.call("update_task", taskId=tid, status="done", completionNote="closed late, PR #9",
               completedAt=1_780_000_000_000, actualMinutes=30)
    doc = tools.call("get_task", taskId=tid)
    assert doc["completedAt"] == 1_780_000_000_000 and doc["actualMinutes"] == 30


def test_update_to_in_progress_applies_the_running_task_rule(tools):
    a, b = task(tools), task(tools)
    tools.call("start_task", taskId=a, callerOrchestrator="sigma")
    err = tools.error("update_task", taskId=b, status="in_progress", callerOrchestrator="sigma")
    assert "INVALID_STATE" in err and a in err
    assert tools.call("get_task", taskId=b)["status"] == "todo"
    tools.call("update_task", taskId=b, status="in_progress")  # no caller: no per-caller rule
    assert tools.call("get_task", taskId=b)["status"] == "in_progress"


def test_a_checkout_supersedes_a_claim_left_open_and_the_files_it_reserved(app, tools, tmp_path):
    """A todo task still carrying an open claim (and the files reserved with it) — say, its row set
    back by hand — is checked out by another: both are superseded, the claim by the new holder, the
    reservations by `system`; the new claim and its reservations are the only ones open."""
    from vantage_peers.domains.tasks import lifecycle

    repo = str(tmp_path)
    tid = tools.call("create_task", title="t", priority="low", createdBy="boss", files=["src/a.py"])
    tid = tid["taskId"] if isinstance(tid, dict) else tid
    first = app.db.write(lambda c: lifecycle.checkout_task(c, task_id=tid, caller="w1", instance=None, now=1_000,
                                                           ttl=10**12, reserve_files=True, repo=repo))
    assert first["claimed"] and first["reservations"]
    app.db.write(lambda c: c.execute("UPDATE tasks SET status = 'todo' WHERE id = ?", (tid,)))
    second = app.db.write(lambda c: lifecycle.checkout_task(c, task_id=tid, caller="w2", instance=None, now=2_000,
                                                            ttl=10**12, reserve_files=True, repo=repo))
    assert second["claimed"] and second["fencingToken"] > first["fencingToken"]
    rows = app.db.read(lambda c: c.query("SELECT kind, holder, releasedAt, releaseReason, releasedBy, claimOf "
                                         "FROM agentLeases ORDER BY seq"))
    old = [r for r in rows if r["holder"] == "w1"]
    assert sorted((r["kind"], r["releaseReason"], r["releasedBy"], r["releasedAt"]) for r in old) == [
        ("path", "superseded", "system", 2_000), ("task", "superseded", "w2", 2_000)]
    assert [(r["kind"], r["releasedAt"]) for r in rows if r["holder"] == "w2"] == [("task", None), ("path", None)]
    assert all(r["claimOf"] == tid for r in rows if r["kind"] == "path")
