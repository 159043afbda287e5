"""Task tools through the in-memory MCP client: CRUD, lists and paging, filters, search, hostile input."""

from __future__ import annotations

import pytest
from support.tasks_helpers import mission, page_all, task

from vantage_peers.domains.tasks.rules import TASK_LITE

pytestmark = pytest.mark.backends


def test_create_returns_bare_id_and_get_shows_everything(tools):
    tid = task(tools, title="Fix login #12", description="d", project="studio/a", tags=["x", "y"], dueDate=5,
               estimatedMinutes=30, assignedToInstance="sigma-1")
    assert isinstance(tid, str) and tid.startswith("tsk_")
    doc = tools.call("get_task", taskId=tid)
    assert doc["_id"] == tid and doc["status"] == "todo" and doc["tags"] == ["x", "y"] and doc["paused"] is False
    assert doc["workSegments"] == [] and doc["openDependencies"] == []
    assert tools.call("get_task", taskId="tsk_unknown") is None


def test_create_refusals(tools):
    assert "priority" in tools.error("create_task", title="t", assignedTo="s", priority=1, createdBy="pi")
    assert "priority must be one of" in tools.error("create_task", title="t", assignedTo="s", priority="p1",
                                                    createdBy="pi")
    assert "createdBy is required" in tools.error("create_task", title="t", assignedTo="s", priority="low")
    assert "INVALID_ARGUMENT: title" in tools.error("create_task", title="  ", assignedTo="s", priority="low",
                                                   createdBy="pi")
    assert "status" in tools.error("create_task", title="t", assignedTo="s", priority="low", createdBy="pi",
                                   status="cancelled")
    assert "NOT_FOUND" in tools.error("create_task", title="t", assignedTo="s", priority="low", createdBy="pi",
                                      missionId="msn_nope")
    assert "larger than" in tools.error("create_task", title="x" * 1_000_000, assignedTo="s", priority="low",
                                        createdBy="pi")


def test_hostile_text_round_trips(tools):
    nasty = "'; DROP TABLE tasks; -- \"q\" AND OR NOT col:x* ((( NEAR( 🚀 ✓"
    tid = task(tools, title=nasty, description=nasty)
    assert tools.call("get_task", taskId=tid)["title"] == nasty
    for query in ['"', "AND OR NOT", "col:x*", "(((", "NEAR(", "🚀", "'; DROP", "*"]:
        assert isinstance(tools.call("search_tasks_by_keyword", query=query)["items"], list)
    for query in ["", "   "]:  # refused, as by every search tool
        assert "INVALID_ARGUMENT: query" in tools.error("search_tasks_by_keyword", query=query)
    assert tools.call("search_tasks_by_keyword", query="DROP TABLE")["items"][0]["_id"] == tid


def test_list_tasks_insert_n_page_all_lite(tools):
    ids = {task(tools, title=f"t{i}") for i in range(45)}
    items = page_all(tools, "list_tasks", limit=7, fields="lite")
    assert {i["_id"] for i in items} == ids and len(items) == 45
    assert all(set(i) <= set(TASK_LITE) for i in items)
    assert all(set(i) == set(TASK_LITE) - {"missionId"} for i in items)
    m = mission(tools)
    tid = task(tools, missionId=m)
    lite = tools.call("list_tasks", missionId=m, fields="lite")["items"][0]
    assert list(lite) == list(TASK_LITE) and lite["_id"] == tid
    assert len(tools.call("list_tasks", limit=500)["items"]) == 46
    assert len(tools.call("list_tasks")["items"]) == 20


def test_list_tasks_newest_updated_first(app, tools):
    a, b, c = task(tools), task(tools), task(tools)
    app.db.write(lambda conn: conn.execute("UPDATE tasks SET updatedAt = updatedAt - 1000"))
    tools.call("update_task", taskId=a, priority="low")
    order = [i["_id"] for i in tools.call("list_tasks")["items"]]
    assert order == [a, c, b]


def test_list_tasks_by_mission_paging(tools):
    m, other = mission(tools), mission(tools)
    ids = {task(tools, missionId=m) for _ in range(25)}
    task(tools, missionId=other)
    items = page_all(tools, "list_tasks_by_mission", missionId=m, limit=4, fields="lite")
    assert {i["_id"] for i in items} == ids
    assert "NOT_FOUND" in tools.error("list_tasks_by_mission", missionId="msn_none")
    assert tools.call("list_tasks_by_mission", missionId=m, status="done")["items"] == []


def test_status_filters_and_aliases(tools):
    ids = {s: task(tools, title=s) for s in ("todo", "review", "blocked")}
    ids["in_progress"] = task(tools, status="in_progress")
    ids["done"] = task(tools)
    tools.call("complete_task", taskId=ids["done"], completionNote="done with proof abc1234")
    ids["cancelled"] = task(tools)
    tools.call("update_task", taskId=ids["cancelled"], status="cancelled", cancelReason="dup",
               callerOrchestrator="pi")
    tools.call("update_task", taskId=ids["review"], status="review")
    tools.call("block_task", taskId=ids["blocked"], reason="waiting on pi since 10:00")

    def got(status):
        return {i["_id"] for i in tools.call("list_tasks", status=status, limit=200)["items"]}

    by = {v: k for k, v in ids.items()}
    assert {by[i] for i in got("open")} == {"todo", "in_progress", "review", "blocked"}
    assert {by[i] for i in got("active")} == {"todo", "in_progress"}
    assert len(got("all")) == 6
    assert {by[i] for i in got(["done", "cancelled"])} == {"done", "cancelled"}
    assert {by[i] for i in got("review")} == {"review"}
    assert {by[i] for i in got('["todo","blocked"]')} == {"todo", "blocked"}
    assert "not a status or alias" in tools.error("list_tasks", status="opened")
    assert "empty array" in tools.error("list_tasks", status=[])


def test_filters(tools):
    base = task(tools, assignedTo="a", project="p1", createdBy="c1", assignedToInstance="a-1")
    task(tools, assignedTo="b", project="p2", createdBy="c2")
    cron = task(tools, createdBy="cron-daily")
    poll = task(tools, title="/Check-Messages")
    keep = task(tools, createdBy="cronus", title="check-messages-v2")

    def ids(**kw):
        return {i["_id"] for i in tools.call("list_tasks", limit=200, **kw)["items"]}

    assert ids(assignedTo="a") == {base}
    assert ids(assignedToInstance="a-1") == {base}
    assert ids(project="p1") == {base}
    assert ids(createdBy="c1") == {base}
    assert ids(excludeAutoGenerated=True) & {cron, poll} == set()
    assert keep in ids(excludeAutoGenerated=True) and len(ids(excludeAutoGenerated=True)) == 3
    t = tools.call("get_task", taskId=keep)["updatedAt"]
    since = tools.call("list_tasks", updatedSince=t, limit=200, detail="full")["items"]
    assert keep in {i["_id"] for i in since} and all(i["updatedAt"] >= t for i in since)
    assert tools.call("list_tasks", updatedSince=t + 10_000)["items"] == []
    created = tools.call("get_task", taskId=cron)["createdAt"]
    assert cron not in ids(createdBefore=created) and base in ids(createdBefore=created)


def test_list_overdue(tools):
    late = [task(tools, dueDate=1000 + i) for i in range(5)]
    task(tools, dueDate=9_999_999_999_999)
    done = task(tools, dueDate=10)
    tools.call("complete_task", taskId=done, completionNote="finished, see PR #3")
    task(tools, dueDate=11, assignedTo="other")
    items = page_all(tools, "list_overdue_tasks", assignedTo="sigma", limit=2)
    assert [i["_id"] for i in items] == late  # most overdue first, done excluded
    assert len(tools.call("list_overdue_tasks")["items"]) == 6


def test_search_by_keyword(tools):
    a = task(tools, title="Migrate HeroSection to lit-ui", assignedTo="tau")
    b = task(tools, title="Other", description="mentions herosection in passing")
    items = tools.call("search_tasks_by_keyword", query="herosection", detail="full")["items"]
    assert [i["_id"] for i in items] == [a, b]  # title weighs more
    assert "[HeroSection]" in items[0]["snippet"] and items[0]["score"] > 0
    assert [i["_id"] for i in tools.call("search_tasks_by_keyword", query="herosection", assignedTo="tau")["items"]] == [a]
    assert tools.call("search_tasks_by_keyword", query="herosection", status="done")["items"] == []


def test_search_results_stay_under_the_envelope_cap(tools):
    """Search hits are full tasks (descriptions up to 200 KB): the answer is trimmed like a list page."""
    for i in range(6):
        task(tools, title=f"bulky {i}", description="bulky payload " + "x" * 30_000)
    res = tools.raw("search_tasks_by_keyword", query="bulky", limit=50)
    body = res.content[0].text
    assert len(body.encode()) < 60_000
    data = res.structured_content
    assert 1 <= len(data["items"]) < 6 and data["truncated"] is True
    assert "truncated" not in tools.call("search_tasks_by_keyword", query="bulky", limit=1)


def test_update_partial_and_returns_null(tools):
    m = mission(tools)
    tid = task(tools, tags=["a"])
    assert tools.call("update_task", taskId=tid, title="new", tags=["b"], missionId=m, priority="low") is None
    doc = tools.call("get_task", taskId=tid)
    assert (doc["title"], doc["tags"], doc["missionId"], doc["priority"], doc["assignedTo"]) == (
        "new", ["b"], m, "low", "sigma")
    assert "NOT_FOUND" in tools.error("update_task", taskId="tsk_nope", title="x")
    assert "priority" in tools.error("update_task", taskId=tid, priority="HIGH")


def test_delete_task_rbac(tools):
    tid = task(tools)
    assert "RBAC_DENIED" in tools.error("delete_task", taskId=tid, callerOrchestrator="sigma")
    assert "callerOrchestrator is required" in tools.error("delete_task", taskId=tid)
    assert tools.call("delete_task", taskId=tid, callerOrchestrator="pi") == {"deleted": True}
    assert tools.call("delete_task", taskId=tid, callerOrchestrator="pi") == {"deleted": False}
    other = task(tools)
    assert tools.call("delete_task", taskId=other, callerOrchestrator="system") == {"deleted": True}


@pytest.mark.parametrize("tool", ["start_task", "pause_task", "resume_task", "checkout_task", "get_task"])
def test_unknown_ids_are_clean(tools, tool):
    args = {"taskId": "'; DROP TABLE tasks;--", "callerOrchestrator": "sigma"}
    if tool == "get_task":
        assert tools.call(tool, taskId=args["taskId"]) is None
    else:
        assert "NOT_FOUND" in tools.error(tool, **args)


def test_hostile_sizes_types_and_cursors(tools):
    big = "x" * 1_000_000
    tid = task(tools)
    assert "larger than" in tools.error("update_task", taskId=tid, description=big)
    assert "larger than" in tools.error("complete_task", taskId=tid, completionNote=big)
    assert "larger than" in tools.error("block_task", taskId=tid, reason=big)
    assert "longer than" in tools.error("create_task", title="t", assignedTo=big, priority="low", createdBy="pi")
    assert "INVALID_ARGUMENT: query is larger than" in tools.error("search_tasks_by_keyword", query=big)
    assert tools.call("get_task", taskId=big) is None
    assert "cursor" in tools.error("list_tasks", cursor="not-a-cursor")
    assert "cursor" in tools.error("list_tasks", cursor="eyJ4IjoxfQ")
    assert len(tools.call("list_tasks", limit=-5)["items"]) == 1
    assert tools.call("list_tasks", limit=10**9)["items"][0]["_id"] == tid
    assert tools.error("list_tasks", updatedSince="yesterday")
    assert tools.error("create_task", title="t", assignedTo="s", priority="low", createdBy="pi", tags="notalist")
    assert "dueDate" in tools.error("create_task", title="t", assignedTo="s", priority="low", createdBy="pi",
                                    dueDate=-1)
    emoji = task(tools, title="🚀 déploiement 完成", tags=["🏷️"])
    assert tools.call("get_task", taskId=emoji)["tags"] == ["🏷️"]
    assert tools.call("search_tasks_by_keyword", query="deploiement")["items"][0]["_id"] == emoji
