"""validate_task_payload: the lint reports what the real tools refuse, with fix snippets, writing nothing."""

from __future__ import annotations

import pytest
from support.tasks_helpers import task

pytestmark = pytest.mark.backends


def lint(tools, tool, **payload):
    return tools.call("validate_task_payload", tool=tool, payload=payload)


def test_valid_payloads(tools):
    ok = {"title": "t", "assignedTo": "sigma", "priority": "low", "createdBy": "pi"}
    assert lint(tools, "create_task", **ok) == {"valid": True, "tool": "create_task", "failures": []}
    tid = task(tools)
    assert lint(tools, "update_task", taskId=tid, priority="urgent")["valid"] is True
    assert lint(tools, "complete_task", taskId=tid, completionNote="did it, PR #3")["valid"] is True
    assert tools.call("get_task", taskId=tid)["status"] == "todo"  # nothing written
    assert tools.call("list_tasks")["items"].__len__() == 1


def test_every_failure_has_a_fix(tools):
    res = lint(tools, "create_task", title="", priority=3, assignedTo=7, tags="x", dependsOn=["tsk_no"],
               status="done", estimatedMinutes=-1, dueDate="tomorrow")
    fields = [f["field"] for f in res["failures"]]
    assert res["valid"] is False
    for name in ("title", "priority", "assignedTo", "tags", "dependsOn", "status", "estimatedMinutes", "dueDate",
                 "createdBy"):
        assert name in fields, name
    assert all(f["fix"] not in (None, "", {}) and f["code"] and f["message"] for f in res["failures"])
    priority = next(f for f in res["failures"] if f["field"] == "priority")
    assert priority["fix"] == {"priority": "high"}


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({"title": "t", "assignedTo": "s", "priority": "HIGH", "createdBy": "pi"}, "INVALID_ARGUMENT"),
        ({"title": "t", "assignedTo": "s", "priority": "low", "createdBy": "pi", "missionId": "msn_x"}, "NOT_FOUND"),
        ({"title": "t", "assignedTo": "s", "priority": "low", "createdBy": "pi", "status": "cancelled"},
         "INVALID_ARGUMENT"),
    ],
)
def test_create_lint_matches_real_tool(tools, payload, code):
    first = lint(tools, "create_task", **payload)["failures"][0]
    err = tools.error("create_task", **payload)
    assert first["code"] == code and f"{code}: {first['message']}" in err


def test_update_and_complete_lint_match_real_tool(app, tools):
    tid = task(tools)
    cases = [
        ("update_task", {"taskId": tid, "status": "cancelled", "callerOrchestrator": "sigma", "cancelReason": "r"}),
        ("update_task", {"taskId": tid, "title": "x", "callerOrchestrator": "tau"}),
        ("update_task", {"taskId": tid, "status": "cancelled", "callerOrchestrator": "pi"}),
        ("update_task", {"taskId": tid, "dependsOn": [tid]}),
        ("complete_task", {"taskId": tid, "completionNote": "  "}),
        ("complete_task", {"taskId": tid, "completionNote": "n", "callerOrchestrator": "tau"}),
    ]
    for tool, payload in cases:
        first = lint(tools, tool, **payload)["failures"][0]
        assert f"{first['code']}: {first['message']}" in tools.error(tool, **payload), (tool, payload)
    tools.call("start_task", taskId=tid)
    app.db.write(lambda c: c.execute("UPDATE taskSegments SET startedAt = startedAt - 600 * 60000 WHERE taskId = ?",
                                     (tid,)))
    res = lint(tools, "complete_task", taskId=tid, completionNote="finished")
    seg = res["failures"][0]
    assert seg["field"] == "workSegments" and seg["fix"]["tool"] == "update_task"
    assert seg["message"] in tools.error("complete_task", taskId=tid, completionNote="finished")


def test_unknown_task_and_tool(tools):
    res = lint(tools, "complete_task", taskId="tsk_nope", completionNote="x")
    assert res["failures"][0]["code"] == "NOT_FOUND"
    assert "tool must be one of" in tools.error("validate_task_payload", tool="drop_table", payload={})
    res = lint(tools, "update_task")
    assert res["failures"][0]["field"] == "taskId"


def test_done_task_cannot_be_cancelled_in_lint(tools):
    tid = task(tools)
    tools.call("complete_task", taskId=tid, completionNote="done, commit abc1234")
    res = lint(tools, "update_task", taskId=tid, status="cancelled", cancelReason="r", callerOrchestrator="pi")
    assert res["failures"][0]["code"] == "INVALID_STATE"


def test_lint_accepts_what_the_tool_accepts(tools):
    """JSON-string arrays and numeric strings are normalised by the MCP layer before the real tool
    runs; the lint must not report them as failures."""
    dep = task(tools)
    payload = {"title": "t", "assignedTo": "sigma", "priority": "high", "createdBy": "pi",
               "tags": '["a", "b"]', "dependsOn": f'["{dep}"]', "estimatedMinutes": "30", "dueDate": "1790000000000"}
    assert tools.call("validate_task_payload", tool="create_task", payload=payload)["valid"] is True
    tid = tools.call("create_task", **payload)
    doc = tools.call("get_task", taskId=tid)
    assert doc["tags"] == ["a", "b"] and doc["dependsOn"] == [dep] and doc["estimatedMinutes"] == 30
    bad = tools.call("validate_task_payload", tool="create_task", payload={**payload, "tags": "not json"})
    assert [f["field"] for f in bad["failures"]] == ["tags"]
