"""Briefing notes: create/get/update/delete, RBAC, linked memories, paging, keyword search, doctrine."""

from __future__ import annotations

import pytest
from support.records_helpers import HOSTILE_QUERIES, insert_memory, page_all, search_hostile

from vantage_peers.search.doctrine import VP_SOURCES_DOCTRINE

pytestmark = pytest.mark.backends

DOCTRINE_1 = (
    "**VP-Sources doctrine**: MUST be called before any factual claim about fleet state, audits, dette tooling, "
    "mission/task/client status, incident history, doctrine references."
)
DOCTRINE_2 = 'Cite returned ids in the answer footer as `VP-Sources: recall("<query>")→[ids] | none-needed:<reason>`.'


def note(tools, **over):
    args = {"title": "Sprint 82 close", "topic": "sprint-review", "participants": ["pi", "sigma"],
            "content": "Completed M3 iframeEmbedSessions.", "createdBy": "pi", **over}
    return tools.call("create_briefing_note", **args)


def test_create_and_get_round_trip(tools, app):
    insert_memory(app, "mem_1")
    insert_memory(app, "mem_2")
    note_id = note(tools, decisions=["ship it", "retro friday"], linkedMemoryIds=["mem_1", "mem_2", "mem_1"])
    assert note_id.startswith("brf_")
    got = tools.call("get_briefing_note", noteId=note_id)
    assert got["_id"] == note_id and got["_creationTime"] == got["createdAt"]
    assert got["participants"] == ["pi", "sigma"] and got["decisions"] == ["ship it", "retro friday"]
    assert got["linkedMemoryIds"] == ["mem_1", "mem_2"]  # deduplicated, order kept
    assert got["createdBy"] == "pi" and "updatedBy" not in got
    assert tools.call("get_briefing_note", noteId="brf_nope") is None


def test_linked_memory_ids_must_exist(tools, app):
    insert_memory(app, "mem_ok")
    msg = tools.error("create_briefing_note", title="t", topic="x", participants=[], content="c", createdBy="pi",
                      linkedMemoryIds=["mem_ok", "mem_missing", "mem_gone"])
    assert "NOT_FOUND" in msg and "mem_missing" in msg and "mem_gone" in msg and "mem_ok" not in msg
    assert tools.call("list_briefing_notes")["items"] == []  # nothing written
    note_id = note(tools, linkedMemoryIds=["mem_ok"])
    assert "NOT_FOUND" in tools.error("update_briefing_note", noteId=note_id, callerOrchestrator="pi",
                                      linkedMemoryIds=["mem_x"])
    assert tools.call("get_briefing_note", noteId=note_id)["linkedMemoryIds"] == ["mem_ok"]


def test_update_is_partial_and_stamps_updated(tools):
    note_id = note(tools, decisions=["a"])
    before = tools.call("get_briefing_note", noteId=note_id)
    assert tools.call("update_briefing_note", noteId=note_id, callerOrchestrator="pi", title="New title") is None
    after = tools.call("get_briefing_note", noteId=note_id)
    assert after["title"] == "New title" and after["content"] == before["content"]
    assert after["decisions"] == ["a"] and after["updatedBy"] == "pi" and after["updatedAt"] >= before["updatedAt"]
    tools.call("update_briefing_note", noteId=note_id, callerOrchestrator="system", decisions=[])
    after = tools.call("get_briefing_note", noteId=note_id)
    assert after["decisions"] == [] and after["updatedBy"] == "system"


def test_update_rbac_deny_by_default(tools):
    note_id = note(tools)
    assert "INVALID_ARGUMENT" in tools.error("update_briefing_note", noteId=note_id, title="x")  # caller omitted
    denied = tools.error("update_briefing_note", noteId=note_id, callerOrchestrator="sigma", title="x")
    assert "RBAC_DENIED" in denied and "pi" in denied
    assert tools.call("get_briefing_note", noteId=note_id)["title"] == "Sprint 82 close"
    assert "NOT_FOUND" in tools.error("update_briefing_note", noteId="brf_missing", callerOrchestrator="pi", title="x")
    assert "nothing to update" in tools.error("update_briefing_note", noteId=note_id, callerOrchestrator="pi")


def test_delete_creator_or_system(tools):
    a, b = note(tools), note(tools)
    assert "RBAC_DENIED" in tools.error("delete_briefing_note", noteId=a, callerOrchestrator="sigma")
    assert "INVALID_ARGUMENT" in tools.error("delete_briefing_note", noteId=a)
    assert tools.call("delete_briefing_note", noteId=a, callerOrchestrator="pi") == {"deleted": True}
    assert tools.call("delete_briefing_note", noteId=b, callerOrchestrator="system") == {"deleted": True}
    assert tools.call("delete_briefing_note", noteId=a, callerOrchestrator="pi") == {"deleted": False}
    assert tools.call("search_briefing_notes_by_keyword", query="iframeEmbedSessions")["items"] == []


def test_list_insert_n_get_n_with_cursor_chain_and_lite(tools):
    n = 37
    ids = [note(tools, title=f"note {i}", topic="standup" if i % 3 == 0 else "sprint-review") for i in range(n)]
    items, pages = page_all(tools, "list_briefing_notes", limit=5)
    assert [i["_id"] for i in items] == list(reversed(ids)) and pages == 8
    assert len(tools.call("list_briefing_notes")["items"]) == 15  # full, no explicit limit
    assert len(tools.call("list_briefing_notes", fields="lite")["items"]) == 20
    assert len(tools.call("list_briefing_notes", limit=30)["items"]) == 30
    lite, _ = page_all(tools, "list_briefing_notes", fields="lite", limit=200)
    assert len(lite) == n
    assert all(set(i) == {"_id", "_creationTime", "topic", "title", "participants", "createdBy"} for i in lite)
    standups, _ = page_all(tools, "list_briefing_notes", topic="standup", limit=4)
    assert len(standups) == 13 and {i["topic"] for i in standups} == {"standup"}


def test_updated_since_filter(tools):
    old = [note(tools, title=f"old {i}") for i in range(3)]
    mark = tools.call("get_briefing_note", noteId=old[-1])["updatedAt"] + 1
    while True:  # make the next writes land after `mark` without sleeping a fixed time
        fresh = note(tools, title="fresh")
        if tools.call("get_briefing_note", noteId=fresh)["createdAt"] >= mark:
            break
        tools.call("delete_briefing_note", noteId=fresh, callerOrchestrator="pi")
    tools.call("update_briefing_note", noteId=old[0], callerOrchestrator="pi", content="edited later")
    got = {i["_id"] for i in page_all(tools, "list_briefing_notes", updatedSince=mark, limit=1)[0]}
    assert got == {fresh, old[0]}


def test_keyword_search_with_topic_filter_and_scores(tools):
    note(tools, title="Release v2.13", topic="vp-release", content="Shipped the paging envelope fix.")
    note(tools, title="Standup", topic="standup", content="Paging work continues; envelope cap tested.")
    note(tools, title="Unrelated", topic="standup", content="Nothing to see.", decisions=["adopt envelope"])
    hits = tools.call("search_briefing_notes_by_keyword", query="envelope", detail="full")["items"]
    assert len(hits) == 3 and all("score" in h for h in hits)
    assert hits == sorted(hits, key=lambda h: -h["score"])
    only = tools.call("search_briefing_notes_by_keyword", query="envelope paging", topic="standup")["items"]
    assert [h["title"] for h in only] == ["Standup"] and "[" in only[0]["snippet"]
    assert len(tools.call("search_briefing_notes_by_keyword", query="envelope", limit=1)["items"]) == 1


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_hostile_search_queries_never_crash(tools, backend, query):
    note(tools, content='weird "quotes" AND (((parens NEAR( col:x* 🙂🚀')
    if not query.strip():
        assert "INVALID_ARGUMENT" in tools.error("search_briefing_notes_by_keyword", query=query)
        return
    result = search_hostile(tools, backend, "search_briefing_notes_by_keyword", query=query)
    assert result is None or isinstance(result["items"], list)


def test_hostile_search_matches_literally(tools):
    note(tools, content='weird "quotes" AND (((parens NEAR( col:x* 🙂🚀')
    assert len(tools.call("search_briefing_notes_by_keyword", query='"quotes" AND')["items"]) == 1
    assert len(tools.call("search_briefing_notes_by_keyword", query="col:x*")["items"]) == 1
    assert "larger than" in tools.error("search_briefing_notes_by_keyword", query="x" * 1_000_000)


def test_huge_and_wrong_inputs(tools):
    big = "a" * 1_000_000
    note_id = note(tools, content=big)
    assert tools.call("get_briefing_note", noteId=note_id)["content"] == big
    assert "larger than" in tools.error("create_briefing_note", title="t", topic="x", participants=[],
                                        content="🙂" * 300_000, createdBy="pi")
    tools.error("create_briefing_note", title="t", topic="x", participants="pi", content="c", createdBy="pi")
    assert "INVALID_ARGUMENT" in tools.error("create_briefing_note", title=" ", topic="x", participants=[],
                                             content="c", createdBy="pi")
    assert "INVALID_ARGUMENT" in tools.error("create_briefing_note", title="t", topic="x", participants=["a"] * 201,
                                             content="c", createdBy="pi")
    page = tools.call("list_briefing_notes", limit=200)
    assert len(page["items"]) == 1  # a 1 MB note alone still comes back


def test_doctrine_paragraphs_are_verbatim_in_descriptions(tools):
    for name in ("list_briefing_notes", "search_briefing_notes_by_keyword"):
        description = tools.listed[name].description
        assert description.endswith(VP_SOURCES_DOCTRINE)
        assert DOCTRINE_1 in description and DOCTRINE_2 in description
    assert "VP-Sources" not in tools.listed["get_briefing_note"].description
