"""Hardening: cursors, bounded snippets, search time budget, byte caps, BUSY budget, journal modes, presence."""

from __future__ import annotations

import base64
import json

import apsw
from conftest import make_settings, open_tools

from vantage_peers.core.envelope import ENVELOPE_TARGET_BYTES
from vantage_peers.db import Database, migrate
from vantage_peers.db.paging import MAX_CURSOR_CHARS
from vantage_peers.server import create_app


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _size(value) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())


def test_forged_cursors_are_invalid_argument_cursor(tools):
    for cursor in (_b64(b"[" * 985 + b"]" * 985), _b64(b"{" * 5000), "A" * (MAX_CURSOR_CHARS + 1), "%%%",
                   _b64(json.dumps({"t": [1], "i": 2}).encode())):
        for tool, args in (("list_messages", {}), ("list_tasks", {}), ("list_peers", {})):
            err = tools.error(tool, **args, cursor=cursor)
            assert "INVALID_ARGUMENT: cursor" in err, (tool, err)


def test_a_megabyte_document_searches_with_a_bounded_snippet(tools):
    big = "alpha beta gamma " * 58_000  # ~1 MB of matching words: FTS5 snippet() was quadratic here
    sent = tools.call("send_message", **{"from": "alice", "channel": "bob", "content": big})
    tools.call("send_message", **{"from": "alice", "channel": "bob", "content": "a short alpha note"})
    res = tools.call("search_messages_by_keyword", query="alpha gamma", limit=5, detail="full")
    assert {i["_id"] for i in res["items"]} >= {sent["messageId"]} or res.get("truncated")
    assert _size(res) <= ENVELOPE_TARGET_BYTES
    hit = next(i for i in res["items"] if i["_id"] == sent["messageId"])
    assert "[alpha]" in hit["snippet"] and "[gamma]" in hit["snippet"] and len(hit["snippet"]) < 400
    assert hit["truncatedFields"] == ["content"] and res["truncated"] is True
    # The way to get the rest: the full document by id.
    assert tools.call("get_message", messageId=sent["messageId"])["content"] == big
    mem = tools.call("store_memory", namespace="n", type="note", content=big, createdBy="alice")
    res = tools.call("text_search", query="beta", namespace="n", limit=1)
    assert res["items"][0]["_id"] == mem["memoryId"] and "[beta]" in res["items"][0]["snippet"]
    assert _size(res) <= ENVELOPE_TARGET_BYTES


def test_check_messages_is_cut_to_the_byte_cap_and_the_rest_follows(tools):
    for i in range(30):
        tools.call("send_message", **{"from": "alice", "channel": "bob", "content": f"m{i:02d} " + "x" * 10_000})
    seen: list[str] = []
    for _ in range(30):
        page = tools.call("check_messages", recipient="bob", limit=500)
        if not page:
            break
        assert _size(page) <= ENVELOPE_TARGET_BYTES and len(page) < 30
        seen.extend(m["content"][:3] for m in page)
        tools.call("mark_as_read", receiptIds=[m["receiptId"] for m in page])
    assert seen == [f"m{i:02d}" for i in range(30)]  # all of them, oldest first, each once
    one = tools.call("send_message", **{"from": "alice", "channel": "carol", "content": "y" * 300_000})
    page = tools.call("check_messages", recipient="carol")
    assert page[0]["messageId"] == one["messageId"] and page[0]["truncatedFields"] == ["content"]
    assert _size(page) <= ENVELOPE_TARGET_BYTES


def test_a_search_past_its_time_budget_answers_truncated(tmp_path):
    app = create_app(make_settings(tmp_path / "b.db", search_budget_ms=1))
    app.db.write(lambda c: c.executemany(
        "INSERT INTO messages (id, sender, channel, content, createdAt) VALUES (?, 'a', 'b', ?, ?)",
        [(f"msg_{i:06d}", f"common word number {i} " * 20, i) for i in range(6000)]))
    try:
        with open_tools(app) as tools:
            res = tools.call("search_messages_by_keyword", query="common word", limit=200)
            assert res["truncated"] is True and len(res["items"]) < 200
            assert tools.call("text_search", query="common", limit=5)["items"] == []  # still answers
    finally:
        app.db.close()


def test_busy_answers_busy_within_the_budget_in_delete_mode(tmp_path):
    path = tmp_path / "d.db"
    app = create_app(make_settings(path, journal_mode="delete", busy_timeout_ms=300))
    blocker = apsw.Connection(str(path))
    try:
        with open_tools(app) as tools:
            tools.call("send_message", **{"from": "a", "channel": "b", "content": "before"})
            blocker.execute("BEGIN EXCLUSIVE")  # another process's long write (or a reader's pending lock)
            for tool, args in (("send_message", {"from": "a", "channel": "b", "content": "x"}),
                               ("check_messages", {"recipient": "b"}),
                               ("search_messages_by_keyword", {"query": "before"})):
                err = tools.error(tool, **args)
                assert err.split(": ", 1)[-1].startswith("BUSY:") and "retry" in err, (tool, err)
            blocker.execute("ROLLBACK")
            assert tools.call("check_messages", recipient="b")[0]["content"] == "before"
    finally:
        blocker.close()
        app.db.close()


def test_journal_mode_belongs_to_the_file(tmp_path, capsys):
    wal = Database(tmp_path / "w.db", journal_mode="wal")
    migrate(wal)
    other = Database(tmp_path / "w.db", journal_mode="delete")  # a delete-mode server joins a WAL file
    assert other.journal_mode == "wal" and other.conn.scalar("PRAGMA journal_mode") == "wal"
    assert "VP_JOURNAL_MODE=delete" in other.journal_warning and "warning" in capsys.readouterr().err
    other.close()
    wal.close()

    dele = Database(tmp_path / "d.db", journal_mode="delete")
    migrate(dele)
    assert dele.conn.scalar("PRAGMA synchronous") == 2  # FULL: rollback journals need it
    joiner = Database(tmp_path / "d.db", journal_mode="wal")  # never converts a file in use to WAL
    assert joiner.journal_mode == "delete" and joiner.journal_warning
    assert dele.conn.scalar("PRAGMA journal_mode") == "delete"
    truncate = Database(tmp_path / "d.db", journal_mode="truncate")  # rollback modes mix safely
    assert truncate.journal_mode == "truncate" and truncate.journal_warning is None
    for db in (joiner, truncate, dele):
        db.close()
    fresh = Database(tmp_path / "f.db", journal_mode="wal")
    assert fresh.journal_warning is None and fresh.conn.scalar("PRAGMA synchronous") == 1
    assert fresh.conn.scalar("PRAGMA journal_size_limit") > 0
    fresh.close()


def test_a_failing_presence_refresh_never_fails_the_call(tmp_path, monkeypatch):
    from vantage_peers.domains.profiles import store as profiles

    def broken(*args, **kwargs):
        raise apsw.IOError("disk I/O error")

    monkeypatch.setattr(profiles, "touch", broken)
    app = create_app(make_settings(tmp_path / "p.db", orchestrator="alice", presence_interval_seconds=0.0))
    try:
        with open_tools(app) as tools:
            assert tools.call("whoami")["orchestratorId"] == "alice"
            assert tools.call("send_message", channel="bob", content="hi")["messageId"]
    finally:
        app.db.close()


def test_deep_arguments_are_invalid_argument_in_process(tools):
    """The in-memory path (the stdio transport checks the wire itself, see test_transport.py)."""
    value: object = "leaf"
    for _ in range(70):
        value = {"k": value}
    err = tools.error("store_memory", namespace="n", type="note", content="c", createdBy="a",
                      episode={"goal": "g", "action": "a", "outcome": "o", "insight": value})
    assert "INVALID_ARGUMENT" in err
