"""Episodes: structured memories of type `episode`, through the MCP tools."""

from __future__ import annotations

import pytest

from vantage_peers.domains.memory.models import SEVERITIES

pytestmark = pytest.mark.backends

FIELDS = {"context": "Deploying frontend component", "goal": "Fix broken layout on mobile",
          "action": "Delegated to dev-frontend with exact file:line brief",
          "outcome": "Fixed in one pass, no revisions needed",
          "insight": "Precise briefs with file:line citations eliminate revision cycles"}


def episode(tools, namespace="orchestrator/alice", createdBy="alice", severity="minor", **over):
    return tools.call("store_episode", namespace=namespace, createdBy=createdBy, severity=severity,
                      **{**FIELDS, **over})["memoryId"]


def test_store_and_get_episode(tools):
    mid = episode(tools)
    doc = tools.call("get_episode", memoryId=mid)
    assert doc["type"] == "episode" and doc["severity"] == "minor" and doc["createdBy"] == "alice"
    for key, value in FIELDS.items():
        assert doc[key] == value
    assert "Insight: Precise briefs" in doc["content"]
    assert tools.call("get_memory", memoryId=mid)["episode"]["goal"] == FIELDS["goal"]
    plain = tools.call("store_memory", namespace="n", type="note", content="not an episode", createdBy="s")
    assert tools.call("get_episode", memoryId=plain["memoryId"]) is None
    assert tools.call("get_episode", memoryId="mem_nope") is None


def test_both_severity_scales_accepted_and_others_refused(tools):
    for severity in SEVERITIES:
        assert episode(tools, severity=severity)
    err = tools.error("store_episode", namespace="n", createdBy="a", severity="5", **FIELDS)
    assert "severity must be one of minor, major, critical, low, medium, high" in err
    err = tools.error("store_episode", namespace="n", createdBy="a", severity="minor", **{**FIELDS, "goal": " "})
    assert "goal must be a non-empty string" in err
    assert tools.error("store_episode", namespace="n", createdBy="a", context="only context")


def test_list_episodes_insert_n_newest_first_filters_and_paging(tools):
    ids = [episode(tools, context=f"episode {i}") for i in range(25)]
    bob = episode(tools, createdBy="bob", namespace="orchestrator/bob")
    tools.call("store_memory", namespace="orchestrator/alice", type="note", content="a note", createdBy="alice")
    everything = tools.call("list_episodes", limit=200)["items"]
    assert [e["_id"] for e in everything] == [bob, *reversed(ids)]
    seen, cursor = [], None
    while True:
        page = tools.call("list_episodes", namespace="orchestrator/alice", limit=10, cursor=cursor)
        seen += [e["_id"] for e in page["items"]]
        if "nextCursor" not in page:
            break
        cursor = page["nextCursor"]
    assert seen == list(reversed(ids))
    assert [e["_id"] for e in tools.call("list_episodes", orchestrator="bob")["items"]] == [bob]
    assert len(tools.call("list_episodes", namespace="orchestrator/*", limit=200)["items"]) == 26
    lite = tools.call("list_episodes", fields="lite", limit=1)["items"][0]
    assert set(lite) == {"_id", "_creationTime", "namespace", "createdBy", "severity", "insight"}
    assert tools.call("list_episodes", namespace="nobody")["items"] == []


def test_soft_deleted_episode_leaves_lists_and_searches(tools):
    mid = episode(tools, insight="ephemeral axolotl insight")
    tools.call("soft_delete_memory", memoryId=mid)
    assert tools.call("list_episodes")["items"] == []
    assert tools.call("search_episodes_by_keyword", query="axolotl")["items"] == []


@pytest.mark.parametrize("tool", ["search_episodes_by_keyword", "search_episodes_by_semantic"])
def test_episode_searches_only_return_episodes(tools, tool):
    mid = episode(tools, outcome="The flaky migration test was fixed")
    tools.call("store_memory", namespace="orchestrator/alice", type="note", content="flaky migration note",
               createdBy="alice")
    res = tools.call(tool, query="flaky migration", namespace="orchestrator/alice", detail="full")
    assert [i["_id"] for i in res["items"]] == [mid]
    assert res["items"][0]["outcome"] == "The flaky migration test was fixed"
    if tool == "search_episodes_by_semantic":
        assert res["mode"] == "keyword" and res["reason"]
    assert tools.call(tool, query="flaky", namespace="orchestrator/bob")["items"] == []
