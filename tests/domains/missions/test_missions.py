"""Mission tools: create, get with tasks and counts, list paging and aliases, updates and cancel rules."""

from __future__ import annotations

import pytest
from support.tasks_helpers import call, error, mission, page_all, task

from vantage_peers.domains.missions.vocabulary import MISSION_LITE

pytestmark = pytest.mark.backends


def get(tools, m):
    return call(tools, "get_mission", {"missionId": m})


def test_create_returns_bare_id_and_get_embeds_tasks(tools):
    m = mission(tools, description="d", brief="b", progress=10, startDate=1, targetDate=2, templateId="repo-fix-v1")
    assert isinstance(m, str) and m.startswith("msn_")
    a, b = task(tools, missionId=m), task(tools, missionId=m)
    task(tools)  # not in the mission
    tools.call("start_task", taskId=b)
    doc = get(tools, m)
    assert doc["_id"] == m and doc["agents"] == ["sigma"] and doc["progress"] == 10 and doc["templateId"] == "repo-fix-v1"
    assert [t["_id"] for t in doc["tasks"]] == [a, b]
    assert doc["taskCounts"] == {"todo": 1, "in_progress": 1, "review": 0, "blocked": 0, "done": 0, "cancelled": 0,
                                 "total": 2}
    assert get(tools, "msn_nope") is None


def test_create_refusals(tools):
    assert "status must be one of" in error(tools, "create_mission", {
        "name": "n", "project": "p", "status": "open", "priority": "high", "pilot": "s", "agents": [], "createdBy": "pi"})
    assert "status must be one of" in error(tools, "create_mission", {
        "name": "n", "project": "p", "status": "cancelled", "priority": "high", "pilot": "s", "agents": [],
        "createdBy": "pi"})
    assert "priority" in error(tools, "create_mission", {
        "name": "n", "project": "p", "status": "plan", "priority": 2, "pilot": "s", "agents": [], "createdBy": "pi"})
    assert "name must be a non-empty string" in error(tools, "create_mission", {
        "name": " ", "project": "p", "status": "plan", "priority": "low", "pilot": "s", "agents": [],
        "createdBy": "pi"})
    assert "progress" in error(tools, "create_mission", {
        "name": "n", "project": "p", "status": "plan", "priority": "low", "pilot": "s", "agents": [],
        "createdBy": "pi", "progress": 101})
    assert "createdBy is required" in error(tools, "create_mission", {
        "name": "n", "project": "p", "status": "plan", "priority": "low", "pilot": "s", "agents": []})


def test_list_missions_paging_and_lite(tools):
    ids = {mission(tools, name=f"m{i}") for i in range(33)}
    items = page_all(tools, "list_missions", limit=5, fields="lite")
    assert {i["_id"] for i in items} == ids
    assert all(list(i) == list(MISSION_LITE) for i in items)
    assert len(tools.call("list_missions")["items"]) == 20


def test_list_missions_filters_and_aliases(tools):
    by_status = {s: mission(tools, status=s) for s in ("brainstorm", "plan", "execute", "validate", "complete")}
    cancelled = mission(tools)
    tools.call("update_mission", missionId=cancelled, status="cancelled", cancelReason="r", callerOrchestrator="pi")
    p = mission(tools, project="other", pilot="tau")

    def got(**kw):
        return {i["_id"] for i in tools.call("list_missions", limit=200, **kw)["items"]}

    inv = {v: k for k, v in by_status.items()}
    assert {inv.get(i) for i in got(status="open") - {p}} == {"brainstorm", "plan", "execute", "validate"}
    assert {inv.get(i) for i in got(status="active") - {p}} == {"plan", "execute"}
    assert len(got(status="all")) == 7
    assert got(status="cancelled") == {cancelled}
    assert got(status=["complete", "brainstorm"]) == {by_status["complete"], by_status["brainstorm"]}
    assert got(project="other") == {p} and got(pilot="tau") == {p}
    assert "not a status or alias" in tools.error("list_missions", status="blocked")
    t = get(tools, p)["updatedAt"]
    assert p in got(updatedSince=t)


def test_update_mission_partial_and_rbac(tools):
    m = mission(tools)
    assert tools.call("update_mission", missionId=m, brief="new brief", agents=["a", "b"], progress=50) is None
    doc = get(tools, m)
    assert (doc["brief"], doc["agents"], doc["progress"], doc["name"]) == ("new brief", ["a", "b"], 50, "M")
    assert "RBAC_DENIED" in tools.error("update_mission", missionId=m, brief="x", callerOrchestrator="tau")
    tools.call("update_mission", missionId=m, pilot="tau", callerOrchestrator="sigma")  # pilot hands over
    tools.call("update_mission", missionId=m, brief="ok", callerOrchestrator="tau")
    assert "NOT_FOUND" in tools.error("update_mission", missionId="msn_x", brief="x")
    assert "status must be one of" in tools.error("update_mission", missionId=m, status="blocked")


def test_cancel_mission_rules(tools):
    m = mission(tools)  # created by pi, pilot sigma
    assert "cancelReason is required" in tools.error("update_mission", missionId=m, status="cancelled",
                                                    callerOrchestrator="pi")
    assert "RBAC_DENIED" in tools.error("update_mission", missionId=m, status="cancelled", cancelReason="r",
                                        callerOrchestrator="sigma")
    assert "callerOrchestrator is required" in tools.error("update_mission", missionId=m, status="cancelled",
                                                           cancelReason="r")
    tools.call("update_mission", missionId=m, status="cancelled", cancelReason="dropped", callerOrchestrator="pi")
    doc = get(tools, m)
    assert doc["status"] == "cancelled" and doc["cancelReason"] == "dropped"
    done = mission(tools, status="complete")
    assert "INVALID_STATE" in tools.error("update_mission", missionId=done, status="cancelled", cancelReason="r",
                                          callerOrchestrator="pi")


def test_status_and_progress_shortcuts(tools):
    m = mission(tools)
    before = get(tools, m)["updatedAt"]
    assert tools.call("update_mission_status", missionId=m, status="execute") is None
    assert tools.call("update_mission_progress", missionId=m, progress=75) is None
    doc = get(tools, m)
    assert doc["status"] == "execute" and doc["progress"] == 75 and doc["updatedAt"] >= before
    assert "update_mission" in tools.error("update_mission_status", missionId=m, status="cancelled")
    assert "status must be one of" in tools.error("update_mission_status", missionId=m, status="open")
    assert "progress" in tools.error("update_mission_progress", missionId=m, progress=-1)
    assert "progress" in tools.error("update_mission_progress", missionId=m, progress=100.5)
    assert "NOT_FOUND" in tools.error("update_mission_progress", missionId="msn_x", progress=1)
    assert "NOT_FOUND" in tools.error("update_mission_status", missionId="msn_x", status="plan")


def test_cancelled_mission_is_not_auto_completed(tools):
    m = mission(tools)
    t = task(tools, missionId=m)
    tools.call("update_mission", missionId=m, status="cancelled", cancelReason="r", callerOrchestrator="pi")
    tools.call("complete_task", taskId=t, completionNote="finished anyway, commit abc1234")
    assert get(tools, m)["status"] == "cancelled"
