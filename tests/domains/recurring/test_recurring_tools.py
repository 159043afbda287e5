"""Recurring task tools through the in-memory MCP client: list paging, filters, RBAC and refusals."""

from __future__ import annotations

import pytest

from vantage_peers.core.ids import now_ms
from vantage_peers.domains.recurring import store
from vantage_peers.pipeline.app import effective_hints

pytestmark = pytest.mark.backends

TOOLS = ("create_recurring_task", "get_recurring_task", "list_recurring_tasks", "update_recurring_task",
         "delete_recurring_task", "pause_recurring_task", "resume_recurring_task")


def create(tools, **extra):
    args = {"title": "Daily standup report", "assignedTo": "carol", "priority": "medium",
            "cronExpression": "0 9 * * *", "project": "vantage-peers", "createdBy": "bob", **extra}
    return tools.call("create_recurring_task", **args)


def test_the_documented_example_call_works(tools):
    template_id = tools.call("create_recurring_task", title="Daily standup report",
                             description="Generate standup: what was done, in progress, blockers",
                             assignedTo="carol", priority="medium", cronExpression="0 9 * * *",
                             project="vantage-peers")
    assert isinstance(template_id, str) and template_id.startswith("rec_")
    got = tools.call("get_recurring_task", recurringTaskId=template_id)
    assert got["_id"] == template_id and got["cronExpression"] == "0 9 * * *" and got["timezone"] == "UTC"
    assert got["paused"] is False and got["runCount"] == 0 and got["nextRunAt"] > now_ms()
    assert "createdBy" not in got  # no identity given and no VP_ORCHESTRATOR
    assert tools.call("list_recurring_tasks")["items"][0]["_id"] == template_id


def test_annotations(tools):
    for name in TOOLS:
        assert name in tools.listed
    ann = {name: effective_hints(tools.listed[name].annotations) for name in TOOLS}  # MCP defaults applied
    assert ann["get_recurring_task"].read_only_hint and ann["list_recurring_tasks"].read_only_hint
    assert ann["delete_recurring_task"].destructive_hint is True
    assert ann["create_recurring_task"].read_only_hint is False and ann["pause_recurring_task"].idempotent_hint


def test_insert_n_then_list_n_with_cursor_paging_and_filters(tools):
    n = 47
    ids = set()
    for i in range(n):
        ids.add(create(tools, title=f"t{i}", assignedTo="carol" if i % 2 else "dave",
                       project="p1" if i % 3 == 0 else "p2"))
    items, pages = tools.pages("list_recurring_tasks", limit=20)
    assert len(items) == n and {i["_id"] for i in items} == ids and pages == 3
    assert [i["_creationTime"] for i in items] == sorted((i["_creationTime"] for i in items), reverse=True)
    carol, _ = tools.pages("list_recurring_tasks", assignedTo="carol", limit=7)
    assert len(carol) == n // 2 and all(i["assignedTo"] == "carol" for i in carol)
    both, _ = tools.pages("list_recurring_tasks", assignedTo="dave", project="p1", limit=5)
    assert len(both) == sum(1 for i in range(n) if i % 2 == 0 and i % 3 == 0)
    for template_id in list(ids)[:5]:
        tools.call("pause_recurring_task", recurringTaskId=template_id, callerOrchestrator="bob")
    paused, _ = tools.pages("list_recurring_tasks", paused=True)
    active, _ = tools.pages("list_recurring_tasks", paused=False, limit=200)
    assert len(paused) == 5 and len(active) == n - 5
    lite = tools.call("list_recurring_tasks", fields="lite", limit=200)["items"]
    assert len(lite) == n and set(lite[0]) <= set(store.LITE) and "description" not in lite[0]


def test_update_pause_resume_delete(tools, app):
    template_id = create(tools)
    before = tools.call("get_recurring_task", recurringTaskId=template_id)
    # Minutes 7 and 37 never meet the template's 09:00 (a */30 would, when the test runs between 08:30 and 09:00 UTC).
    changed = tools.call("update_recurring_task", recurringTaskId=template_id, cronExpression="7,37 * * * *",
                         timezone="Europe/Paris", priority="high", callerOrchestrator="bob")
    assert changed["cronExpression"] == "7,37 * * * *" and changed["timezone"] == "Europe/Paris"
    assert changed["priority"] == "high" and changed["nextRunAt"] != before["nextRunAt"]
    assert changed["nextRunAt"] - now_ms() <= 30 * 60_000
    paused = tools.call("pause_recurring_task", recurringTaskId=template_id, callerOrchestrator="bob")
    assert paused["paused"] is True and "nextRunAt" not in paused
    assert tools.call("pause_recurring_task", recurringTaskId=template_id)["paused"] is True
    resumed = tools.call("resume_recurring_task", recurringTaskId=template_id, callerOrchestrator="system")
    assert resumed["paused"] is False and resumed["nextRunAt"] > now_ms()
    # A fired task shows its template in get_task; deleting the template keeps the task.
    app.db.write(lambda c: c.execute("UPDATE recurringTasks SET nextRunAt = 1 WHERE id = ?", (template_id,)))
    fired = store.fire_due(app.db)
    task = tools.call("get_task", taskId=fired["taskIds"][0])
    assert task["recurringTaskId"] == template_id and task["createdBy"] == f"cron-{template_id}"
    assert tools.call("list_tasks", excludeAutoGenerated=True)["items"] == []
    preview = tools.call("bulk_complete_tasks", filter={"autoGeneratedOnly": True})
    assert preview["count"] == 1 and preview["sampleIds"] == fired["taskIds"]
    assert tools.call("delete_recurring_task", recurringTaskId=template_id, callerOrchestrator="bob") == {
        "deleted": True}
    assert tools.call("get_recurring_task", recurringTaskId=template_id) is None
    assert tools.call("get_task", taskId=fired["taskIds"][0])["status"] == "todo"
    assert tools.call("delete_recurring_task", recurringTaskId=template_id, callerOrchestrator="bob") == {
        "deleted": False}
    # A hard delete needs a caller, like delete_task.
    assert "callerOrchestrator is required" in tools.error("delete_recurring_task", recurringTaskId=template_id)


@pytest.mark.parametrize("expr", ["0 9 * *", "@daily", "0 9 * * * *", "99 * * * *", "0 0 31 2 *", "H 9 * * *"])
def test_bad_cron_is_refused_on_create_and_update(tools, expr):
    message = tools.error("create_recurring_task", title="x", assignedTo="carol", cronExpression=expr)
    assert "INVALID_ARGUMENT: cronExpression:" in message and "'0 9 * * *'" in message
    template_id = create(tools)
    message = tools.error("update_recurring_task", recurringTaskId=template_id, cronExpression=expr)
    assert "INVALID_ARGUMENT: cronExpression:" in message
    assert tools.call("get_recurring_task", recurringTaskId=template_id)["cronExpression"] == "0 9 * * *"


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "../../etc/passwd", "/etc/localtime", "", "X" * 300,
                                  "localtime", "right/Europe/Paris", "Europe/Paris\x00", "Europe"])
def test_bad_timezone_is_refused(tools, zone):
    message = tools.error("create_recurring_task", title="x", assignedTo="carol", cronExpression="0 9 * * *",
                          timezone=zone)
    assert "INVALID_ARGUMENT: timezone" in message and "Europe/Paris" in message
    assert tools.call("list_recurring_tasks")["items"] == []


def test_other_refusals(tools):
    assert "INVALID_ARGUMENT" in tools.error("create_recurring_task", title="  ", assignedTo="carol",
                                             cronExpression="0 9 * * *")
    assert "priority" in tools.error("create_recurring_task", title="x", assignedTo="carol", priority="1",
                                     cronExpression="0 9 * * *")
    assert "INVALID_ARGUMENT" in tools.error("create_recurring_task", title="x", assignedTo="carol",
                                             cronExpression=9)
    assert "INVALID_ARGUMENT" in tools.error("list_recurring_tasks", cursor="not-a-cursor")
    template_id = create(tools)
    assert "nothing to update" in tools.error("update_recurring_task", recurringTaskId=template_id)


def test_unknown_id(tools):
    assert tools.call("get_recurring_task", recurringTaskId="rec_nope") is None
    for name in ("update_recurring_task", "pause_recurring_task", "resume_recurring_task"):
        extra = {"title": "x"} if name == "update_recurring_task" else {}
        assert tools.error(name, recurringTaskId="rec_nope", **extra).endswith(": NOT_FOUND: recurring task rec_nope does not exist; list_recurring_tasks shows the ids")
    assert tools.call("delete_recurring_task", recurringTaskId="rec_nope", callerOrchestrator="x") == {
        "deleted": False}


def test_wrong_caller_is_refused_and_changes_nothing(tools):
    template_id = create(tools)
    for name, extra in (("update_recurring_task", {"title": "hijack"}), ("pause_recurring_task", {}),
                        ("resume_recurring_task", {}), ("delete_recurring_task", {})):
        message = tools.error(name, recurringTaskId=template_id, callerOrchestrator="mallory", **extra)
        assert "RBAC_DENIED: mallory may not" in message and "bob" in message
    got = tools.call("get_recurring_task", recurringTaskId=template_id)
    assert got["title"] == "Daily standup report" and got["paused"] is False
    assert tools.call("update_recurring_task", recurringTaskId=template_id, title="ok",
                      callerOrchestrator="system")["title"] == "ok"
