"""Anything an agent can send yields a result or a clean `CODE: message` error, never a crash."""

from __future__ import annotations

import pytest
from conftest import ToolError

from vantage_peers.core.limits import MAX_CONTENT_BYTES
from vantage_peers.doctor import filesystem_type, is_network_fs

HOSTILE = [
    "'; DROP TABLE messages; --",
    '" OR 1=1 --',
    "AND OR NOT",
    "col:x*",
    "(((",
    "NEAR(",
    "🚀🔥 émoji ñ 日本語",
    "\x00\x01\x1f",
    "a" * 1_000_000,
    "%_\\",
]

WRONG_TYPES = [123, 1.5, True, ["a"], {"a": 1}]


def _ok_or_clean(tools, name, /, **args):
    """Call a tool; a failure must be an anticipated error with a readable message."""
    try:
        return tools.call(name, **args)
    except ToolError as err:
        text = str(err)
        assert text != f"Error executing tool {name}", f"{name} crashed on {str(args)[:200]}"
        return None


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_strings_everywhere(tools, value):
    r = _ok_or_clean(tools, "send_message", **{"from": "alice", "channel": "bob", "content": value})
    if r is not None and value.strip("\x00\x01\x1f"):
        got = tools.call("get_message", messageId=r["messageId"])
        assert got["content"] == value  # stored byte for byte
    _ok_or_clean(tools, "send_message", **{"from": value, "channel": value, "content": "x"})
    _ok_or_clean(tools, "check_messages", recipient=value, recipientInstanceId=value, tenantId=value)
    _ok_or_clean(tools, "search_messages_by_keyword", query=value)
    _ok_or_clean(tools, "list_messages", **{"from": value}, channel=value)
    _ok_or_clean(tools, "list_messages", cursor=value)
    _ok_or_clean(tools, "get_message", messageId=value)
    _ok_or_clean(tools, "list_broadcast_status", messageId=value)
    _ok_or_clean(tools, "delete_message", messageId=value, callerOrchestrator="alice")
    _ok_or_clean(tools, "mark_as_read", receiptIds=[value])
    _ok_or_clean(tools, "set_summary", orchestratorId="alice", instanceId="alice-1", summary=value)
    _ok_or_clean(tools, "update_profile", orchestratorId=value, name=value)
    _ok_or_clean(tools, "get_profile", orchestratorId=value)
    _ok_or_clean(tools, "list_peers", cursor=value)
    # The database is intact afterwards.
    assert tools.call("send_message", **{"from": "a", "channel": "b", "content": "still fine"})["messageId"]


@pytest.mark.parametrize("value", WRONG_TYPES)
def test_wrong_types_name_the_field(tools, value):
    err = tools.error("send_message", **{"from": "alice", "channel": "bob", "content": value})
    assert "content" in err
    err = tools.error("check_messages", recipient="bob", since=value if not isinstance(value, int) else "soon")
    assert "since" in err
    err = tools.error("mark_as_read", receiptIds=value if not isinstance(value, list) else "x")
    assert "receiptIds" in err
    err = tools.error("list_messages", limit={"x": 1})
    assert "limit" in err


def test_missing_required_fields(tools):
    assert "channel" in tools.error("send_message", **{"from": "a", "content": "x"})
    assert "content" in tools.error("send_message", **{"from": "a", "channel": "b"})
    assert "from" in tools.error("send_message", channel="b", content="x")  # no VP_ORCHESTRATOR either
    assert "INVALID_ARGUMENT" in tools.error("send_message", **{"from": "a", "channel": "b", "content": "   "})
    assert "messageId" in tools.error("get_message")
    assert "fields" in tools.error("list_messages", fields="everything")
    assert "at most 500" in tools.error("update_profile", orchestratorId="a", name="n" * 501)


def test_oversized_content_is_refused_cleanly(tools):
    err = tools.error("send_message", **{"from": "a", "channel": "b", "content": "x" * (MAX_CONTENT_BYTES + 1)})
    assert err.split(": ", 1)[-1].startswith("INVALID_ARGUMENT") or "INVALID_ARGUMENT" in err
    assert f"larger than {MAX_CONTENT_BYTES} bytes" in err
    # One content limit (limits.MAX_CONTENT_BYTES, 1 MiB) for messages and memories alike (#18): a
    # message over messaging's old 1,000,000 bytes but within 1 MiB is accepted, as a memory is.
    assert tools.call("send_message", **{"from": "a", "channel": "b", "content": "x" * 1_000_001})["messageId"]
    tools.call("store_memory", namespace="n", type="note", content="x" * MAX_CONTENT_BYTES, createdBy="a")
    assert "INVALID_ARGUMENT" in tools.error("store_memory", namespace="n", type="note", createdBy="a",
                                             content="x" * (MAX_CONTENT_BYTES + 1))


def test_json_string_arrays_are_accepted(tools):
    r = tools.call("send_message", **{"from": "a", "channel": "b", "content": "x"})
    rid = tools.call("check_messages", recipient="b")[0]["receiptId"]
    assert tools.call("mark_as_read", receiptIds=f'["{rid}"]') == 1
    assert r["messageId"]


def test_unknown_tool_is_an_error(tools):
    assert "not_a_tool" in tools.error("not_a_tool")


def test_network_filesystems_are_flagged(tmp_path):
    assert is_network_fs("nfs4") and is_network_fs("cifs") and is_network_fs("fuse.sshfs") and is_network_fs("smbfs")
    assert not is_network_fs("ext4") and not is_network_fs("apfs") and not is_network_fs(None)
    assert filesystem_type(tmp_path / "not" / "yet" / "there.db") is not None


def test_schema_validation_errors_carry_the_code_and_the_field(tools):
    err = tools.error("list_messages", limit="ten")
    assert "INVALID_ARGUMENT: limit:" in err
    err = tools.error("send_message", channel="b")
    assert "INVALID_ARGUMENT: content: required argument is missing" in err
    err = tools.error("send_message", **{"from": 5, "channel": "b", "content": "x"})
    assert "INVALID_ARGUMENT: from:" in err
