"""Cross-domain consistency: what an agent sees is the same from one domain to the next."""

from __future__ import annotations

import re

import pytest
from conftest import make_settings, open_tools

from vantage_peers.server import create_app

pytestmark = pytest.mark.backends


@pytest.fixture
def sigma(db_path):
    """Tools of a server started as VP_ORCHESTRATOR=sigma, VP_INSTANCE_ID=sigma-1."""
    application = create_app(make_settings(db_path, orchestrator="sigma", instance_id="sigma-1"))
    with open_tools(application) as t:
        yield t
    application.db.close()


def test_the_server_instance_is_not_lent_to_another_orchestrator(sigma):
    """VP_INSTANCE_ID names this server's copy of VP_ORCHESTRATOR, never some other orchestrator's."""
    sigma.call("update_profile", orchestratorId="pi")
    sigma.call("set_summary", orchestratorId="pi", summary="reviewing")
    assert [i.get("instanceId") for i in sigma.call("get_profile", orchestratorId="pi")["instances"]] == [None]
    sigma.call("send_message", channel="tau", content="hi", **{"from": "pi"})
    assert "fromInstanceId" not in sigma.call("list_messages", **{"from": "pi"})["items"][0]
    entry = sigma.call("write_diary", orchestrator="pi", date="2026-01-02", content="x")
    assert "instanceId" not in sigma.call("get_diary", orchestrator="pi", date="2026-01-02")
    assert entry
    task = sigma.call("create_task", title="t", assignedTo="pi", priority="low")
    assert sigma.call("checkout_task", taskId=task, callerOrchestrator="pi")["claimed"] is True
    assert "assignedToInstance" not in sigma.call("get_task", taskId=task)
    # sigma-1 stays sigma's only: a message to the instance id still reaches sigma's instance.
    sigma.call("set_summary", summary="here")
    sigma.call("send_message", channel="sigma-1", content="to the instance", **{"from": "pi"})
    assert [m["content"] for m in sigma.call("check_messages")] == ["to the instance"]


def test_the_server_instance_is_still_the_default_for_its_own_orchestrator(sigma):
    sigma.call("set_summary", summary="here")
    sigma.call("send_message", channel="pi", content="hello")
    assert sigma.call("list_messages", detail="full")["items"][0]["fromInstanceId"] == "sigma-1"
    sigma.call("write_diary", date="2026-01-02", content="x")
    assert sigma.call("get_diary", date="2026-01-02")["instanceId"] == "sigma-1"
    task = sigma.call("create_task", title="t", assignedTo="pi", priority="low")
    sigma.call("checkout_task", taskId=task)
    assert sigma.call("get_task", taskId=task)["assignedToInstance"] == "sigma-1"


SEARCHES = {
    "text_search": {}, "recall": {}, "hybrid_search": {}, "search_episodes_by_keyword": {},
    "search_episodes_by_semantic": {}, "search_fix_patterns": {}, "search_briefing_notes_by_keyword": {},
    "search_components": {}, "search_messages_by_keyword": {}, "search_tasks_by_keyword": {},
}


@pytest.mark.parametrize("name", sorted(SEARCHES))
def test_every_search_refuses_an_empty_query_alike(tools, name):
    for query in ("", "   "):
        assert tools.error(name, query=query).endswith("INVALID_ARGUMENT: query must be a non-empty string")
    big = tools.error(name, query="word " * 10_000)
    assert "INVALID_ARGUMENT: query is larger than 32768 bytes" in big
    assert tools.call(name, query="x" * 30_000)["items"] == []


HUGE_INTEGERS = [
    ("list_tasks", {"updatedSince": 2**63}, "updatedSince"),
    ("list_tasks", {"createdBefore": -(10**30)}, "createdBefore"),
    ("list_missions", {"updatedSince": 10**30}, "updatedSince"),
    ("list_briefing_notes", {"updatedSince": 2**63}, "updatedSince"),
    ("list_messages", {"sessionDay": 2**64}, "sessionDay"),
    ("check_messages", {"since": 2**63}, "since"),
    ("send_message", {"channel": "pi", "content": "x", "sessionDay": 2**63}, "sessionDay"),
    ("create_task", {"title": "t", "assignedTo": "pi", "priority": "low", "dueDate": 2**63}, "dueDate"),
    ("get_component", {"name": "c", "type": "agent", "revision": 2**63}, "revision"),
]


@pytest.mark.parametrize(("name", "args", "field"), HUGE_INTEGERS)
def test_an_integer_beyond_64_bits_is_an_invalid_argument_not_a_crash(sigma, name, args, field):
    assert f"INVALID_ARGUMENT: {field}" in sigma.error(name, **args)


def test_the_largest_64_bit_integer_is_still_accepted(sigma):
    assert sigma.call("list_tasks", updatedSince=2**63 - 1)["items"] == []


def test_a_huge_limit_is_clamped_not_refused(sigma):
    sigma.call("create_task", title="t", assignedTo="pi", priority="low")
    assert len(sigma.call("list_tasks", limit=10**30)["items"]) == 1
    assert sigma.call("check_messages", limit=10**30) == []


def test_validate_task_payload_refuses_the_integers_create_task_refuses(sigma):
    payload = {"title": "t", "assignedTo": "pi", "priority": "low", "dueDate": 2**63}
    report = sigma.call("validate_task_payload", tool="create_task", payload=payload)
    assert report["valid"] is False and [f["field"] for f in report["failures"]] == ["dueDate"]


IDENTITY_ARGS = {"createdBy", "callerOrchestrator", "from", "requestedBy", "recipient"}
IDENTITY_TOOLS = {"get_profile": "orchestratorId", "update_profile": "orchestratorId",
                  "set_summary": "orchestratorId", "write_diary": "orchestrator", "get_diary": "orchestrator"}


def _identity_args(name: str, tool) -> set[str]:
    found = set(tool.input_schema.get("properties", {})) & IDENTITY_ARGS
    if name.startswith(("list_", "search_")):
        found -= {"from", "createdBy", "requestedBy"}  # filters there, not who is calling
    if name in IDENTITY_TOOLS:
        found.add(IDENTITY_TOOLS[name])
    return found


def test_every_description_opens_with_one_sentence_on_one_line(tools):
    for name, tool in tools.listed.items():
        text = tool.description
        first = text.strip().split("\n\n")[0]
        assert "\n" not in first, f"{name}: the first sentence spans lines: {first!r}"
        assert not re.search(r"[.!?] +[A-Z`(]", first), f"{name}: the first line holds several sentences: {first!r}"
        assert all(line == line.rstrip() and not line.startswith("    ") for line in text.splitlines()), name


def test_every_description_states_the_return_shape_and_identity_default(app, tools):
    # The identity defaults are one rule for every tool: the server instructions state it once
    # (sent at initialize) instead of every description repeating it (a lean tools/list, issue 10).
    instructions = app.mcp.instructions
    for arg in sorted(set().union(*(_identity_args(n, t) for n, t in tools.listed.items()))):
        assert f"`{arg}`" in instructions, f"the server instructions should say that {arg} defaults"
    assert "VP_ORCHESTRATOR" in instructions
    for name, tool in tools.listed.items():
        text = tool.description
        # List/Fetch/Search/paged tools return the shapes the instructions state once ({items,
        # nextCursor?}, the object or null, {items}); every other tool names its result.
        assert re.search(r"[Rr]eturns?\b|null|`\{|\bpaged\b|^(List|Fetch|Search|Find)\b|\bitems\b", text), \
            f"{name}: say what it returns"


GETS = {"get_task": {"taskId"}, "get_mission": {"missionId"}, "get_memory": {"memoryId"},
        "get_episode": {"memoryId"}, "get_message": {"messageId"}, "get_briefing_note": {"noteId"},
        "get_bu": {"buId"}, "get_fix_pattern": {"patternId"}, "get_mandate": {"mandateId"},
        "get_mission_template": {"name"}, "get_component": {"name", "type"}, "get_profile": {"orchestratorId"}}
DELETES = {"delete_task": {"taskId": "x"}, "delete_message": {"messageId": "x"}, "delete_briefing_note": {"noteId": "x"},
           "delete_bu": {"buId": "x"}, "delete_diary": {"diaryId": "x"},
           "delete_component": {"name": "x", "type": "agent"}}


def test_unknown_ids_get_null_and_delete_false_in_every_domain(sigma, tools):
    for name, keys in GETS.items():
        args = {k: ("agent" if k == "type" else "zz_unknown") for k in keys}
        assert sigma.call(name, **args) is None, name
    for name, args in DELETES.items():
        assert sigma.call(name, **args)["deleted"] is False, name
        # deleting still needs a caller, known id or not
        assert "INVALID_ARGUMENT: callerOrchestrator is required" in tools.error(name, **args), name
    assert "NOT_FOUND" in sigma.error("soft_delete_memory", memoryId="zz_unknown")
