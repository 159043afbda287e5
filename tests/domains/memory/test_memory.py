"""Memories through the MCP tools: store, get, list, soft delete, relations, ttl, namespaces."""

from __future__ import annotations

import pytest

from vantage_peers.domains.memory.models import MEMORY_TYPES

pytestmark = pytest.mark.backends


def store(tools, content="a note", namespace="project/foo", type="note", **extra):
    return tools.call("store_memory", namespace=namespace, type=type, content=content, createdBy="sigma",
                      **extra)["memoryId"]


def test_store_and_get_round_trip(tools):
    mid = store(tools, "SQLite with apsw was chosen", type="decision")
    assert mid.startswith("mem_")
    doc = tools.call("get_memory", memoryId=mid)
    assert doc["_id"] == mid and doc["content"] == "SQLite with apsw was chosen"
    assert doc["namespace"] == "project/foo" and doc["type"] == "decision" and doc["createdBy"] == "sigma"
    assert doc["isLatest"] is True and doc["_creationTime"] == doc["createdAt"]
    assert "seq" not in doc and "nsKey" not in doc


def test_every_documented_type_is_accepted_and_unknown_refused(tools):
    for kind in MEMORY_TYPES:
        store(tools, f"memory of type {kind}", type=kind)
    err = tools.error("store_memory", namespace="x", type="bogus", content="c", createdBy="s")
    assert "INVALID_ARGUMENT" in err and "type must be one of" in err
    for kind in MEMORY_TYPES:
        assert kind in err


def test_list_insert_n_returns_n_and_pages_the_whole_chain(tools):
    ids = [store(tools, f"memory number {i}") for i in range(45)]
    store(tools, "elsewhere", namespace="project/bar")
    first = tools.call("list_memories", namespace="project/foo")
    assert len(first["items"]) == 20 and "nextCursor" in first
    seen, cursor = [], None
    while True:
        page = tools.call("list_memories", namespace="project/foo", limit=7, cursor=cursor)
        seen += [m["_id"] for m in page["items"]]
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    assert seen == list(reversed(ids))  # newest first, nothing lost, nothing twice
    everything = tools.call("list_memories", namespace="project/foo", limit=200)
    assert len(everything["items"]) == 45 and "nextCursor" not in everything


def test_list_lite_projection_and_type_filter(tools):
    store(tools, "x" * 500, type="fact")
    store(tools, "a decision", type="decision")
    lite = tools.call("list_memories", namespace="project/foo", fields="lite")["items"]
    assert [set(i) for i in lite] == [{"_id", "_creationTime", "namespace", "type", "createdBy", "preview"}] * 2
    assert len(lite[1]["preview"]) == 161
    facts = tools.call("list_memories", namespace="project/foo", type="fact")["items"]
    assert [m["type"] for m in facts] == ["fact"]
    both = tools.call("list_memories", namespace="project/foo", type=["fact", "decision"])["items"]
    assert len(both) == 2
    assert tools.call("list_memories", namespace="empty/ns")["items"] == []
    assert "namespace is required" in tools.error("list_memories", namespace="")


def test_namespaces_are_exact_case_sensitive_and_prefix_queries_work(tools):
    store(tools, "lower", namespace="sigma")
    store(tools, "upper", namespace="Sigma")
    store(tools, "child a", namespace="project/a")
    store(tools, "child b", namespace="project/b/deep")
    store(tools, "sibling", namespace="projects")
    assert [m["content"] for m in tools.call("list_memories", namespace="sigma")["items"]] == ["lower"]
    assert [m["content"] for m in tools.call("list_memories", namespace="Sigma")["items"]] == ["upper"]
    under = {m["content"] for m in tools.call("list_memories", namespace="project/*")["items"]}
    assert under == {"child a", "child b"}
    for bad in (" sigma", "a*b", "x" * 300, "tab\tname"):
        assert "INVALID_ARGUMENT" in tools.error("store_memory", namespace=bad, type="note", content="c",
                                                 createdBy="s")


def test_updates_relation_archives_target_in_same_call(tools):
    old = store(tools, "the API uses REST")
    new = store(tools, "the API uses gRPC", relations=[{"targetId": old, "type": "updates"}])
    target = tools.call("get_memory", memoryId=old)
    assert target["isLatest"] is False and target["supersededBy"] == new
    listed = [m["_id"] for m in tools.call("list_memories", namespace="project/foo")["items"]]
    assert listed == [new]
    with_old = [m["_id"] for m in tools.call("list_memories", namespace="project/foo", includeSuperseded=True)["items"]]
    assert with_old == [new, old]
    assert tools.call("get_memory", memoryId=new)["relations"] == [{"targetId": old, "type": "updates"}]


def test_relates_to_alias_and_non_archiving_relations(tools):
    base = store(tools, "base fact")
    ext = store(tools, "more detail", relatesTo={"targetId": base, "type": "extends"})
    for kind in ("derives", "references", "contradicts"):
        store(tools, f"{kind} edge", relations=[{"targetId": base, "type": kind}])
    assert tools.call("get_memory", memoryId=base)["isLatest"] is True
    assert tools.call("get_memory", memoryId=ext)["relations"] == [{"targetId": base, "type": "extends"}]


def test_relation_refusals(tools):
    assert "NOT_FOUND" in tools.error("store_memory", namespace="n", type="note", content="c", createdBy="s",
                                      relations=[{"targetId": "mem_nope", "type": "updates"}])
    err = tools.error("store_memory", namespace="n", type="note", content="c", createdBy="s",
                      relatesTo={"targetId": "x", "type": "replaces"})
    assert "relations[0].type must be one of" in err
    # A failed store leaves nothing behind.
    assert tools.call("list_memories", namespace="n")["items"] == []
    for name in ("text_search", "recall", "hybrid_search", "search_episodes_by_keyword"):
        assert tools.call(name, query="x \ud800 y")["items"] == []  # the odd token is simply not searchable


def test_soft_delete_hides_everywhere_but_get(tools):
    mid = store(tools, "wrong data about quokkas")
    assert tools.call("soft_delete_memory", memoryId=mid) is None
    doc = tools.call("get_memory", memoryId=mid)
    assert doc["isLatest"] is False and doc["deletedAt"] >= doc["createdAt"]
    assert tools.call("list_memories", namespace="project/foo")["items"] == []
    assert tools.call("text_search", query="quokkas")["items"] == []
    assert tools.call("recall", query="quokkas")["items"] == []
    assert [m["_id"] for m in tools.call("recall", query="quokkas", includeSuperseded=True)["items"]] == [mid]
    assert tools.call("soft_delete_memory", memoryId=mid) is None  # idempotent
    assert "NOT_FOUND" in tools.error("soft_delete_memory", memoryId="mem_unknown")


def test_ttl_expiry_hides_and_purges(tools, app):
    live = store(tools, "temporary wombat note", ttl="2999-01-01T00:00:00Z")
    gone = store(tools, "expiring wombat note", ttl="2999-01-01T00:00:00+02:00")
    assert tools.call("get_memory", memoryId=live)["ttl"] == "2999-01-01T00:00:00Z"
    app.db.write(lambda c: c.execute("UPDATE memories SET expiresAt = 1 WHERE id = ?", (gone,)))
    assert tools.call("get_memory", memoryId=gone) is None
    assert [m["_id"] for m in tools.call("list_memories", namespace="project/foo")["items"]] == [live]
    assert [m["_id"] for m in tools.call("text_search", query="wombat")["items"]] == [live]
    assert [m["_id"] for m in tools.call("recall", query="wombat", includeSuperseded=True)["items"]] == [live]
    assert "NOT_FOUND" in tools.error("store_memory", namespace="n", type="note", content="c", createdBy="s",
                                      relatesTo={"targetId": gone, "type": "extends"})
    assert dict(app.jobs)["memory-expiry"]() == 1
    assert app.db.read(lambda c: c.scalar("SELECT count(*) FROM memories WHERE id = ?", (gone,))) == 0
    assert app.db.read(lambda c: c.scalar("SELECT count(*) FROM embeddingJobs")) == 1


@pytest.mark.parametrize("ttl", ["tomorrow", "2020-01-01T00:00:00Z", "", "2026-13-45"])
def test_bad_or_past_ttl_refused(tools, ttl):
    err = tools.error("store_memory", namespace="n", type="note", content="c", createdBy="s", ttl=ttl)
    assert "INVALID_ARGUMENT: ttl" in err


def test_created_by_required_without_orchestrator(tools):
    err = tools.error("store_memory", namespace="n", type="note", content="c")
    assert "createdBy is required" in err


def test_created_by_defaults_to_configured_orchestrator(db_path):
    from conftest import make_settings, open_tools

    from vantage_peers.server import create_app

    app = create_app(make_settings(db_path, orchestrator="tau"))
    try:
        with open_tools(app) as tools:
            mid = tools.call("store_memory", namespace="n", type="note", content="c")["memoryId"]
            assert tools.call("get_memory", memoryId=mid)["createdBy"] == "tau"
    finally:
        app.db.close()


def test_hostile_and_huge_inputs_give_results_or_clean_errors(tools, backend):
    nasty = "'; DROP TABLE memories; -- \" AND OR NOT col:x* ((( NEAR( 🦘 \x00"
    if backend == "postgres":  # TEXT cannot hold U+0000 there: refused by name, the rest stored as is
        assert "NUL character" in tools.error("store_memory", namespace="n", type="note", content=nasty,
                                              createdBy="s")
        nasty = nasty.replace("\x00", "")
    mid = store(tools, nasty, namespace="ns/🦘")
    assert tools.call("get_memory", memoryId=mid)["content"] == nasty
    assert tools.call("list_memories", namespace="ns/🦘")["items"][0]["_id"] == mid
    big = "é" * 524_288  # 1 MiB in UTF-8: at the limit
    assert store(tools, big)
    err = tools.error("store_memory", namespace="n", type="note", content=big + "x", createdBy="s")
    assert "content is larger than" in err
    assert "INVALID_ARGUMENT" in tools.error("store_memory", namespace="n", type="note", content="   ", createdBy="s")
    assert tools.call("get_memory", memoryId="'; DROP TABLE memories; --") is None
    assert "cursor" in tools.error("list_memories", namespace="n", cursor="not-a-cursor")
    assert "fields" in tools.error("list_memories", namespace="n", fields="medium")
    assert tools.error("store_memory", namespace=5, type="note", content="c", createdBy="s")
    assert tools.error("store_memory", namespace="n", type="note", content=["c"], createdBy="s")
    assert tools.error("list_memories", namespace="n", limit="many")
    # Large pages are cut under the 50,000-byte envelope and still page on.
    for _ in range(3):
        store(tools, "z" * 30_000, namespace="big")
    page = tools.call("list_memories", namespace="big", limit=200)
    assert len(page["items"]) == 1 and "nextCursor" in page


def test_unpaired_surrogates_are_refused_cleanly(tools):
    # Valid JSON ("\ud800"), but not valid Unicode: SQLite cannot store it.
    calls = [("store_memory", dict(namespace="n", type="note", content="bad \ud800 text", createdBy="s")),
             ("store_memory", dict(namespace="n/\udc00", type="note", content="c", createdBy="s")),
             ("get_memory", dict(memoryId="mem_\ud800")),
             ("list_memories", dict(namespace="a\ud800")),
             ("store_episode", dict(namespace="n", createdBy="s", context="\udc00", goal="g", action="a",
                                    outcome="o", insight="i", severity="minor"))]
    for name, args in calls:
        err = tools.error(name, **args)
        assert "INVALID_ARGUMENT" in err and "surrogate" in err, (name, err)
    assert tools.call("list_memories", namespace="n")["items"] == []
    for name in ("text_search", "recall", "hybrid_search", "search_episodes_by_keyword"):
        assert tools.call(name, query="x \ud800 y")["items"] == []  # the odd token is simply not searchable
