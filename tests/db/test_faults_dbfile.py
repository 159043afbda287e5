"""Issue #19 case 1: the database file deleted, replaced or moved under a running server (stdio and
`serve`): writes are refused with DB_FILE_GONE — never acknowledged into a file nobody reads — or,
when the new file is a valid database of our schema, the server reopens it and says so on stderr.
`doctor` and `status` name the process still holding the old file."""

from __future__ import annotations

import json
import os
import subprocess

import apsw
import pytest
from support.faults_helpers import StdioProc, script
from support.http_helpers import serving

from vantage_peers.db import Database, migrate
from vantage_peers.db.fileguard import DbFileGone, stale_holders


def remove_db(path) -> None:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{path}{suffix}"):
            os.remove(f"{path}{suffix}")


def message_count(path) -> int:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute("SELECT count(*) FROM messages").fetchall()[0][0]
    finally:
        conn.close()


def fresh_db(path) -> None:
    db = Database(path)
    migrate(db)
    db.write(lambda c: c.execute("INSERT INTO meta (key, value) VALUES ('made-by', 'test')"))
    db.close()


@pytest.fixture
def stdio(tmp_path):
    procs = []

    def start():
        p = StdioProc(tmp_path / "vp.db")
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.close()


@pytest.mark.slow
def test_deleted_file_refuses_every_write_and_creates_nothing(stdio, tmp_path):
    db = tmp_path / "vp.db"
    srv = stdio()
    assert srv.call("send_message", channel="bob", content="before", **{"from": "alice"})[0] is False
    remove_db(db)  # a user cleaning a folder
    for i in range(5):
        err, text, _ = srv.call("send_message", channel="bob", content=f"lost {i}", **{"from": "alice"})
        assert err and "DB_FILE_GONE:" in text and "restart the server" in text, text
    err, text, _ = srv.call("check_messages", recipient="bob")  # reads say so too
    assert err and "DB_FILE_GONE:" in text
    assert not db.exists()  # no fresh empty file behind the user's back
    assert "DB_FILE_GONE" in srv.stderr_path.read_text()


@pytest.mark.slow
def test_moved_file_refuses_writes(stdio, tmp_path):
    db = tmp_path / "vp.db"
    srv = stdio()
    assert srv.call("send_message", channel="bob", content="before", **{"from": "alice"})[0] is False
    os.rename(db, tmp_path / "elsewhere.db")
    err, text, _ = srv.call("send_message", channel="bob", content="after", **{"from": "alice"})
    assert err and "DB_FILE_GONE:" in text


@pytest.mark.slow
def test_replaced_by_a_valid_database_is_reopened_and_writes_land_there(stdio, tmp_path):
    db = tmp_path / "vp.db"
    srv = stdio()
    for i in range(3):
        assert srv.call("send_message", channel="bob", content=f"old {i}", **{"from": "alice"})[0] is False
    other = tmp_path / "restored" / "vp.db"
    other.parent.mkdir()
    fresh_db(other)
    os.replace(other, db)  # a sync client swaps the file in (no -wal of its own)
    for i in range(5):
        err, text, _ = srv.call("send_message", channel="bob", content=f"new {i}", **{"from": "alice"})
        assert not err, text
    srv.close()
    assert message_count(db) == 5  # every acknowledged write is in the file at the path
    assert "reopened" in srv.stderr_path.read_text()


@pytest.mark.parametrize("content", [b"this is not a database", None])
def test_replaced_by_something_else_refuses_writes(stdio, tmp_path, content):
    db = tmp_path / "vp.db"
    srv = stdio()
    assert srv.call("send_message", channel="bob", content="before", **{"from": "alice"})[0] is False
    tmp = tmp_path / "swap"
    if content is None:  # a database, but not of our schema
        conn = apsw.Connection(str(tmp))
        conn.execute("CREATE TABLE other (x); PRAGMA user_version = 3")
        conn.close()
    else:
        tmp.write_bytes(content)
    os.replace(tmp, db)
    for _ in range(3):
        err, text, _ = srv.call("send_message", channel="bob", content="after", **{"from": "alice"})
        assert err and "DB_FILE_GONE:" in text and "replaced" in text, text


@pytest.mark.slow
def test_deleted_under_serve_and_doctor_and_status_report_it(tmp_path):
    db = tmp_path / "vp.db"
    with serving(db, args=["--no-auth"]) as server:
        def call(content):
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "send_message", "arguments": {"channel": "bob", "content": content,
                                                                     "from": "alice"}}}
            r = server.http("POST", "/mcp", content=json.dumps(body), headers={
                "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-06-18"})
            return r.json()["result"]

        assert not call("before").get("isError")
        remove_db(db)
        for i in range(5):
            result = call(f"lost {i}")
            assert result["isError"] and "DB_FILE_GONE:" in result["content"][0]["text"]
        holders = stale_holders(db)
        assert server.proc.pid in [pid for pid, _ in holders]
        env = {**os.environ, "VP_DB_PATH": str(db), "VP_SCHEDULER": "off", "VP_EMBEDDINGS": "none"}
        doc = subprocess.run([script(), "doctor"], capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
        assert doc.returncode != 0 and f"process {server.proc.pid}" in doc.stdout and "deleted" in doc.stdout, doc.stdout
        assert f"/proc/{server.proc.pid}/fd/" in doc.stdout  # where the lost data can still be copied from
        assert "creating a new empty" in doc.stderr  # the new file is not made silently
        st = subprocess.run([script(), "status", "--json"], capture_output=True, text=True, timeout=180, env=env,
                            cwd=tmp_path)
        data = json.loads(st.stdout)
        assert [h["pid"] for h in data["staleHolders"]] == [server.proc.pid]
        text = subprocess.run([script(), "status"], capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
        assert "DB_FILE_GONE" in text.stdout and str(server.proc.pid) in text.stdout


def test_in_process_database_detects_a_swap_within_the_interval(tmp_path):
    db_path = tmp_path / "vp.db"
    db = Database(db_path)
    migrate(db)
    try:
        db.read(lambda c: c.scalar("SELECT 1"))
        remove_db(db_path)
        with pytest.raises(DbFileGone):
            db.write(lambda c: c.execute("INSERT INTO meta (key, value) VALUES ('x', 'y')"))
        db_path.write_bytes(b"")
        with pytest.raises(DbFileGone):  # and it stays gone, even once a file appears again
            db.write(lambda c: c.execute("INSERT INTO meta (key, value) VALUES ('x', 'y')"))
        with pytest.raises(DbFileGone):
            db.read(lambda c: c.scalar("SELECT 1"))
    finally:
        db.close()
