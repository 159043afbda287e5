"""Compact answers (issue 34): the shaping helpers of core/compact.py."""

from __future__ import annotations

import json

import pytest

from vantage_peers.core.compact import SNIPPET_CHARS, Compact, check_detail, one_line, shape
from vantage_peers.core.errors import InvalidArgument

pytestmark = pytest.mark.fast

SPEC = Compact(keys=("_id", "type"), text=("content",))
DOC = {"_id": "m1", "_creationTime": 1_796_471_447_829, "type": "note", "createdBy": "a",
       "content": "first line\nsecond line " + "x" * 200}


def test_an_item_keeps_its_keys_a_one_line_snippet_and_its_day():
    item = SPEC.item(DOC)
    assert item == {"_id": "m1", "type": "note", "snippet": item["snippet"], "date": "2026-12-05"}
    assert "\n" not in item["snippet"] and len(item["snippet"]) == SNIPPET_CHARS and item["snippet"].endswith("…")
    assert item["snippet"].startswith("first line second line")
    # A search hit's own snippet (its matched words) wins over the content; a short text stays whole.
    assert SPEC.item({**DOC, "snippet": "[first] line"})["snippet"] == "[first] line"
    assert one_line("  a \t b ") == "a b"


def test_shape_compacts_by_default_and_leaves_full_and_lite_alone():
    answer = {"items": [DOC], "nextCursor": "c"}
    compact = shape(answer, "compact", SPEC)
    assert compact["nextCursor"] == "c" and compact["items"][0]["_id"] == "m1" and "content" not in compact["items"][0]
    assert shape(answer, "full", SPEC) is answer
    assert shape(answer, "compact", SPEC, fields="lite") is answer
    assert shape([DOC], None, SPEC)[0]["type"] == "note"  # a bare array (list_diary_by_date_range)
    with pytest.raises(InvalidArgument):
        check_detail("short")


def test_dense_tools_answer_their_structured_content_as_unindented_text(tools):
    """check_messages and the list tools: one text block, the structured content without indentation
    (UTF-8 kept); a tool not declared dense keeps the SDK's indented text."""
    for i in range(3):
        tools.call("send_message", channel="me", content=f"été {i}", **{"from": "you"})
    inbox = tools.raw("check_messages", recipient="me")
    listed = tools.raw("list_messages", channel="me")
    for result in (inbox, listed):
        assert len(result.content) == 1
        text = result.content[0].text
        data = result.structured_content
        assert "\n" not in text and "été" in text
        assert json.loads(text) == (data["result"] if set(data) == {"result"} else data)
    assert len(json.loads(inbox.content[0].text)) == 3
    assert len(inbox.content[0].text) < len(json.dumps(inbox.structured_content["result"], indent=2,
                                                       ensure_ascii=False))
    shown = tools.raw("get_message", messageId=inbox.structured_content["result"][0]["messageId"])
    assert "\n" in shown.content[0].text  # not dense: as the SDK writes it
