"""Stream markers: wrap/parse helpers (spec §26's three cases) and emission by the six tools."""

from __future__ import annotations

import json

import pytest
from conftest import make_settings, open_tools
from support.ui_helpers import seed_all

from vantage_peers.pipeline.settings import Settings
from vantage_peers.server import create_app
from vantage_peers.ui import MARKER_END, MARKER_START, parse_tool_result, wrap_tool_result

TASKS = {"kind": "tasks-table", "items": [{"_id": "j97abc", "title": "Fix auth bug", "status": "in_progress",
                                           "priority": "high", "assignedTo": "sigma"}]}


def test_wrap_is_the_documented_minified_format():
    assert wrap_tool_result(TASKS) == (
        '__VP_TOOL_RESULT__{"kind":"tasks-table","items":[{"_id":"j97abc","title":"Fix auth bug",'
        '"status":"in_progress","priority":"high","assignedTo":"sigma"}]}__END__')
    assert MARKER_START == "__VP_TOOL_RESULT__" and MARKER_END == "__END__"


def test_parse_case_1_text_is_the_marker():
    assert parse_tool_result(wrap_tool_result(TASKS)) == TASKS


def test_parse_case_2_marker_among_other_content():
    diary = {"kind": "diary-entry", "item": {"_id": "d1", "date": "2026-06-27", "orchestrator": "sigma",
                                             "content": "shipped __END__ tricky", "highlights": ["a"]}}
    text = '{"items": []}\nSome human text.\n' + wrap_tool_result(diary) + "\ntrailing words"
    assert parse_tool_result(text) == diary
    # a broken marker earlier in the text is skipped, the valid one after it is found
    assert parse_tool_result("__VP_TOOL_RESULT__{oops}__END__ then " + wrap_tool_result(TASKS)) == TASKS


@pytest.mark.parametrize("text", [
    "plain text, no marker", "", "__VP_TOOL_RESULT__", "__VP_TOOL_RESULT__{}__END__",
    '__VP_TOOL_RESULT__{"kind":"nope","items":[]}__END__',
    '__VP_TOOL_RESULT__{"kind":"diary-entry","items":[]}__END__',  # diary uses `item`, singular
    '__VP_TOOL_RESULT__{"kind":"tasks-table","items":[{"_id":1,"title":"x","status":"todo"}]}__END__',
    "__VP_TOOL_RESULT__" + "[" * 100_000 + "__END__",  # deep nesting: RecursionError must not escape
    ("__VP_TOOL_RESULT__x__END__" * 5000),
    None, 42, b"bytes", ["list"],
])
def test_parse_case_3_no_valid_marker_is_none_and_never_raises(text):
    assert parse_tool_result(text) is None


@pytest.mark.parametrize("payload", [
    {"kind": "tasks-table"},
    {"kind": "tasks-table", "items": [{"_id": "x", "status": "todo"}]},  # title missing
    {"kind": "mission-timeline", "items": [{"_id": "m", "name": "n", "status": "s", "progress": 150}]},
    {"kind": "diary-entry", "item": {"_id": "d", "date": "27/06/2026", "orchestrator": "s", "content": "c"}},
    {"kind": "unknown", "items": []},
    "not an object", None,
])
def test_wrap_rejects_an_invalid_payload_with_type_error(payload):
    with pytest.raises(TypeError, match=r"^\[stream-marker\] wrapToolResult: invalid payload — "):
        wrap_tool_result(payload)


def test_every_kind_round_trips():
    payloads = [
        TASKS,
        {"kind": "messages-feed", "items": [{"_id": "m", "from": "pi", "channel": "fleet", "content": "hi",
                                             "createdAt": 1}]},
        {"kind": "diary-entry", "item": {"_id": "d", "date": "2026-01-02", "orchestrator": "s", "content": "c"}},
        {"kind": "mission-timeline", "items": [{"_id": "m", "name": "n", "status": "execute", "progress": 40}]},
        {"kind": "briefing-note", "item": {"_id": "b", "topic": "t", "title": "T", "participants": ["pi"]}},
        {"kind": "memory-quote", "items": [{"_id": "q", "namespace": "ns", "type": "feedback", "content": "c",
                                            "score": 0.25}]},
    ]
    for payload in payloads:
        assert parse_tool_result("x" + wrap_tool_result(payload) + "y") == payload


EMITTERS = {"list_tasks": "tasks-table", "list_messages": "messages-feed", "get_diary": "diary-entry",
            "list_missions": "mission-timeline", "get_briefing_note": "briefing-note", "recall": "memory-quote"}


def _calls(ids, detail=None):
    more = {} if detail is None else {"detail": detail}  # compact answers (the default, #34) carry cards too
    return {
        "list_tasks": {"assignedTo": "sigma", **more},
        "list_messages": {"channel": "fleet", **more},
        "get_diary": {"date": "2026-06-01", "orchestrator": "sigma"},
        "list_missions": {"pilot": "tau", **more},
        "get_briefing_note": {"noteId": ids["note"][0]},
        "recall": {"query": "marker", "namespace": "sigma", **more},
    }


@pytest.mark.parametrize("detail", [None, "full"])
def test_the_six_tools_append_a_marker_when_enabled(db_path, detail):
    app = create_app(make_settings(db_path, emit_ui_markers=True))
    try:
        with open_tools(app) as tools:
            ids = seed_all(tools, "marker", n=3)
            for tool, args in _calls(ids, detail).items():
                result = tools.raw(tool, **args)
                assert not result.is_error, tool
                assert len(result.content) == 2, tool
                first, second = (c.text for c in result.content)
                json.loads(first)  # the normal text is untouched JSON
                assert second.startswith(MARKER_START) and second.endswith(MARKER_END), tool
                payload = parse_tool_result("\n".join((first, second)))
                assert payload is not None and payload["kind"] == EMITTERS[tool], tool
                if "items" in payload:
                    assert len(payload["items"]) == 3, tool
                    assert all("marker" in (i.get("title") or i.get("name") or i.get("content")) for i in
                               payload["items"]), tool
                else:
                    assert "marker" in payload["item"].get("content", "") + payload["item"].get("title", "")
            # a null result (no diary that day) and other tools carry no marker
            none = tools.raw("get_diary", date="2027-01-01", orchestrator="sigma")
            assert not any(MARKER_START in getattr(c, "text", "") for c in none.content)
            assert len(tools.raw("list_briefing_notes").content) == 1
            # fields=lite lacks message content: no marker, the page itself is still returned
            lite = tools.raw("list_messages", channel="fleet", fields="lite")
            assert not lite.is_error and len(lite.content) == 1
    finally:
        app.db.close()


def test_markers_are_off_by_default(tools):
    ids = seed_all(tools, "marker", n=1)
    for tool, args in _calls(ids).items():
        result = tools.raw(tool, **args)
        assert len(result.content) == 1 and MARKER_START not in result.content[0].text, tool


@pytest.mark.parametrize("value, enabled", [("1", True), ("true", True), ("TRUE", True), ("0", False),
                                            ("false", False), ("", False)])
def test_env_values(value, enabled):
    assert Settings.from_env({"VP_EMIT_UI_MARKERS": value}, dotenv=False).emit_ui_markers is enabled
