"""text_search, recall and hybrid_search in keyword mode; RRF; hostile FTS input; doctrine strings."""

from __future__ import annotations

import pytest

from vantage_peers.pipeline.app import effective_hints
from vantage_peers.search.doctrine import VP_SOURCES_DOCTRINE
from vantage_peers.search.fusion import rrf

pytestmark = pytest.mark.backends  # each test runs on SQLite and on PostgreSQL (#25)

HOSTILE = ['"', '""', "AND OR NOT", "col:x*", "(((", "NEAR(", "NEAR(a b, 2)", "content : x", "nsKey : *",
           "🦘🔥", "*", "^start", "a' OR '1'='1", "-- ;", "\\", "{content}: x", "x" * 5000, "\x00", "NOT", "OR"]


def put(tools, content, namespace="project/foo", type="note"):
    return tools.call("store_memory", namespace=namespace, type=type, content=content, createdBy="sigma")["memoryId"]


def test_rrf_fuses_by_rank_with_k_60():
    fused = rrf({"keyword": ["a", "b", "c"], "vector": ["c", "a", "d"]})
    assert [f.key for f in fused] == ["a", "c", "b", "d"]
    top = fused[0]
    assert top.score == pytest.approx(1 / 61 + 1 / 62) and top.ranks == {"keyword": 1, "vector": 2}
    assert top.matched_by == ["keyword", "vector"]
    assert fused[2].matched_by == ["keyword"] and fused[2].score == pytest.approx(1 / 62)
    assert rrf({"keyword": ["x", "x"]})[0].ranks == {"keyword": 1}
    assert rrf({}) == [] and len(rrf({"a": list("abcdef")}, limit=2)) == 2


def test_text_search_ranks_snippets_and_falls_back_to_any_word(tools):
    best = put(tools, "apsw loads sqlite-vec; apsw bundles sqlite")
    other = put(tools, "sqlite is the storage engine")
    put(tools, "nothing relevant here")
    res = tools.call("text_search", query="apsw sqlite", detail="full")
    assert res["mode"] == "keyword" and res["match"] == "all"
    assert [i["_id"] for i in res["items"]] == [best]
    assert "[apsw]" in res["items"][0]["snippet"] and res["items"][0]["score"] > 0
    anyw = tools.call("text_search", query="storage unicorn")
    assert anyw["match"] == "any" and [i["_id"] for i in anyw["items"]] == [other]
    assert tools.call("text_search", query="SQLITE")["items"]  # case-insensitive words
    assert len(tools.call("text_search", query="sqlite", limit=1)["items"]) == 1


def test_keyword_mode_recall_and_hybrid_never_empty_without_a_key(tools):
    target = put(tools, "The deployment runbook lives in docs/runbook.md", type="procedure")
    put(tools, "Lunch is at noon", type="note")
    for tool in ("recall", "hybrid_search"):
        res = tools.call(tool, query="where is the deployment runbook?", detail="full")
        assert res["mode"] == "keyword" and "embeddings are off" in res["reason"]
        top = res["items"][0]
        assert top["_id"] == target and top["matchedBy"] == ["keyword"] and top["ranks"] == {"keyword": 1}
        assert {"_id", "namespace", "type", "content", "score", "snippet"} <= set(top)
    assert tools.call("recall", query="runbook", type="note")["items"] == []
    assert tools.call("recall", query="runbook", type=["note", "procedure"])["items"][0]["_id"] == target
    assert "type must be one of" in tools.error("recall", query="runbook", type="nonsense")


def test_search_namespaces_exact_prefix_and_all(tools):
    a = put(tools, "shared keyword alpha", namespace="project/a")
    b = put(tools, "shared keyword alpha", namespace="project/b")
    c = put(tools, "shared keyword alpha", namespace="Project/a")
    d = put(tools, "shared keyword alpha", namespace="projects")
    for tool in ("text_search", "recall", "hybrid_search"):
        def ids(ns, tool=tool):
            return {i["_id"] for i in tools.call(tool, query="alpha", namespace=ns, limit=50)["items"]}

        assert ids("project/a") == {a}
        assert ids("Project/a") == {c}
        assert ids("project/*") == {a, b}
        assert ids(None) == ids("*") == {a, b, c, d}
        assert ids("nothing/here") == set()


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_fts_input_never_errors(tools, query):
    put(tools, 'text with "quotes" AND OR NOT col:x* ((( NEAR( 🦘🔥 and content : x')
    for tool in ("text_search", "recall", "hybrid_search", "search_episodes_by_keyword",
                 "search_episodes_by_semantic"):
        res = tools.call(tool, query=query, namespace="project/*")
        assert isinstance(res["items"], list)


def test_hostile_queries_still_match_literal_words(tools):
    mid = put(tools, 'the NEAR operator and col:x* are plain words here')
    assert [i["_id"] for i in tools.call("text_search", query="NEAR(")["items"]] == [mid]
    assert [i["_id"] for i in tools.call("text_search", query="col:x*")["items"]] == [mid]
    assert tools.call("text_search", query="(((")["items"] == []


def test_query_size_and_type_refusals(tools):
    assert "query is larger than" in tools.error("recall", query="word " * 10_000)
    assert "INVALID_ARGUMENT" in tools.error("text_search", query="   ")
    assert tools.error("hybrid_search", query=["a"])
    assert tools.error("recall", query="x", limit="ten")
    assert "namespace" in tools.error("recall", query="x", namespace="a*b")


def test_search_limits_are_clamped_and_envelope_capped(tools):
    for i in range(12):
        put(tools, f"limit test entry {i}")
    assert len(tools.call("text_search", query="entry")["items"]) == 10  # default 10
    assert len(tools.call("recall", query="entry", limit=0)["items"]) == 1
    assert len(tools.call("hybrid_search", query="entry", limit=10_000)["items"]) == 12
    for _ in range(4):
        put(tools, "huge " + "y" * 30_000, namespace="big")
    res = tools.call("recall", query="huge", namespace="big")
    assert len(res["items"]) == 1 and res["truncated"] is True


def test_doctrine_strings_are_appended_verbatim(tools):
    assert VP_SOURCES_DOCTRINE.startswith("**VP-Sources doctrine**: MUST be called before any factual claim")
    for name in ("recall", "hybrid_search", "text_search"):
        desc = tools.listed[name].description
        assert desc.endswith(VP_SOURCES_DOCTRINE), name
        assert 'VP-Sources: recall("<query>")→[ids] | none-needed:<reason>' in desc
    assert VP_SOURCES_DOCTRINE not in tools.listed["list_memories"].description


def test_tool_annotations(tools):
    expect = {"store_memory": (False, False), "get_memory": (True, False), "list_memories": (True, False),
              "soft_delete_memory": (False, True), "recall": (True, False), "text_search": (True, False),
              "hybrid_search": (True, False), "store_episode": (False, False), "get_episode": (True, False),
              "list_episodes": (True, False), "search_episodes_by_keyword": (True, False),
              "search_episodes_by_semantic": (True, False)}
    for name, (read_only, destructive) in expect.items():
        ann = effective_hints(tools.listed[name].annotations)  # the MCP defaults applied (docs/clients.md)
        assert (ann.read_only_hint, ann.destructive_hint, ann.open_world_hint) == (read_only, destructive, False)
