"""Compact answers through the tools (issue 34): 5 realistic items answer in at most 2 KB by default,
the whole documents with `detail: "full"`, and an explicit `fields: "lite"` keeps its projection."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.backends

TEXT = ("The deploy script reads DATABASE_URL from the environment and falls back to the local file when "
        "it is unset; on the staging host it was unset after the systemd unit moved to EnvironmentFile=, "
        "so the workers wrote to the file while the web process read PostgreSQL. Fix: set the variable.")
LIMIT_BYTES = 2048


def answer_bytes(result) -> int:
    text = sum(len(c.text.encode()) for c in result.content if getattr(c, "text", None) is not None)
    return text + len(json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":")).encode())


def seed(tools) -> None:
    for i in range(5):
        tools.call("store_memory", namespace="team/app", type="decision", content=f"Deploy note {i}: {TEXT}",
                   createdBy="t")
        tools.call("send_message", channel="team", content=f"Deploy {i} done. {TEXT}", **{"from": "t"})
        tools.call("create_task", title=f"Fix the deploy fallback {i}", priority="high", assignedTo="t",
                   description=TEXT, project="app", createdBy="t")


CASES = [
    ("recall", {"query": "deploy database", "namespace": "team/app"}, "content"),
    ("text_search", {"query": "deploy", "namespace": "team/app"}, "content"),
    ("list_memories", {"namespace": "team/app"}, "content"),
    ("list_messages", {"channel": "team"}, "content"),
    ("search_messages_by_keyword", {"query": "deploy"}, "content"),
    ("list_tasks", {"project": "app"}, "description"),
    ("search_tasks_by_keyword", {"query": "deploy"}, "description"),
]


def test_five_items_fit_in_two_kilobytes_and_full_keeps_every_field(tools):
    seed(tools)
    for tool, args, long_field in CASES:
        compact = tools.raw(tool, **args, limit=5)
        full = tools.raw(tool, **args, limit=5, detail="full")
        assert not compact.is_error and not full.is_error, tool
        items = compact.structured_content["items"]
        full_items = full.structured_content["items"]
        assert len(items) == 5 and len(full_items) == 5, tool
        assert answer_bytes(compact) <= LIMIT_BYTES, (tool, answer_bytes(compact))
        assert all(long_field not in item and item["_id"] and item["date"] for item in items), tool
        assert all(TEXT in item[long_field] for item in full_items), tool  # whole text, every key
        assert [i["_id"] for i in items] == [i["_id"] for i in full_items], tool
        assert json.loads(compact.content[0].text) == compact.structured_content, tool


def test_a_compact_hit_says_why_it_matched_and_get_memory_gives_it_whole(tools):
    seed(tools)
    hit = tools.call("recall", query="deploy", namespace="team/app", limit=1)["items"][0]
    assert set(hit) == {"_id", "namespace", "type", "matchedBy", "snippet", "date"}
    assert hit["matchedBy"] == ["keyword"] and "[deploy]" in hit["snippet"].lower() and len(hit["snippet"]) <= 48
    assert TEXT in tools.call("get_memory", memoryId=hit["_id"])["content"]


def test_lite_keeps_its_projection_and_a_bad_detail_is_refused(tools):
    seed(tools)
    lite = tools.call("list_tasks", project="app", fields="lite", limit=2)["items"][0]
    assert {"_id", "_creationTime", "title", "status", "priority"} <= set(lite) and "snippet" not in lite
    refused = tools.raw("list_tasks", project="app", detail="tiny")
    assert refused.is_error and "detail" in refused.content[0].text
