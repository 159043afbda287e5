"""Compact answers (issue 34): the shaping helpers of core/compact.py."""

from __future__ import annotations

import json

import pytest
from mcp.types import CallToolResult, TextContent

from vantage_peers.core.compact import SNIPPET_CHARS, Compact, check_detail, dense_text, one_line, shape
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


def test_dense_text_is_the_structured_content_without_indentation():
    data = {"items": [{"_id": "m1", "snippet": "é"}]}
    result = CallToolResult(content=[TextContent(type="text", text=json.dumps(data, indent=2))],
                            structured_content=data)
    dense = dense_text(result)
    assert json.loads(dense.content[0].text) == data and "\n" not in dense.content[0].text
    assert len(dense.content[0].text) < len(result.content[0].text)
    two = result.model_copy(update={"content": [*result.content, TextContent(type="text", text="{}")]})
    assert dense_text(two) is two  # warnings or notices in a second block: left as the pipeline made them
