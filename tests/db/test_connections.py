"""Connections: one per worker thread, closed when the thread ends; DB descriptors stay bounded."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import anyio
import pytest
from anyio._backends import _asyncio
from conftest import make_settings

from vantage_peers.db import Database, migrate
from vantage_peers.server import create_app
from vantage_peers.transport import serve_stdio

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd (Linux)")


def db_fds(path: Path) -> int:
    """Open descriptors of this process on the DB file (and its -wal / -shm companions)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(path)):
            count += 1
    return count


def test_a_thread_s_connection_closes_when_the_thread_ends(tmp_path):
    path = tmp_path / "t.db"
    db = Database(path)
    migrate(db)

    def one_thread() -> None:
        t = threading.Thread(target=lambda: db.read(lambda c: c.scalar("SELECT count(*) FROM meta")))
        t.start()
        t.join()

    one_thread()
    # SQLite defers closing one descriptor of a file another connection of the process holds locked
    # (POSIX locks are per process) and reuses it at the next open: that one is counted in `base`.
    base = db_fds(path)
    for _ in range(10):
        one_thread()
    assert db_fds(path) == base  # ten threads came and went: none left a connection behind
    assert db.open_connections() == 1  # the constructing thread's
    db.close()
    assert db_fds(path) == 0


@pytest.mark.slow
def test_db_descriptors_stay_bounded_with_calls_spaced_past_worker_idle_time(tmp_path, monkeypatch):
    """The real tool path: our stdio transport + the SDK server loop + anyio worker threads, which
    retire after MAX_IDLE_TIME idle (10 s in anyio; made 0.2 s here instead of sleeping 10 s a call)."""
    monkeypatch.setattr(_asyncio.WorkerThread, "MAX_IDLE_TIME", 0.2)
    path = tmp_path / "fd.db"
    app = create_app(make_settings(path, orchestrator="alice", presence_interval_seconds=0.0))
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    stdin, stdout = os.fdopen(r_in, "rb"), os.fdopen(w_out, "wb")
    to_server, from_server = os.fdopen(w_in, "wb"), os.fdopen(r_out, "rb")
    server = threading.Thread(target=lambda: anyio.run(serve_stdio, app.mcp, stdin, stdout), daemon=True)
    server.start()

    def rpc(rid: int, method: str, params: dict) -> dict:
        to_server.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\n")
        to_server.flush()
        reply = json.loads(from_server.readline())
        assert reply["id"] == rid
        return reply

    try:
        rpc(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "fd", "version": "1"}})
        to_server.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        to_server.flush()
        counts = []
        for i in range(1, 9):
            reply = rpc(i, "tools/call", {"name": "send_message", "arguments": {"channel": "bob", "content": f"m{i}"}})
            assert not reply["result"].get("isError"), reply
            counts.append(db_fds(path))
            time.sleep(0.5)  # past the worker idle time: the worker that ran the last call retires
        reply = rpc(99, "tools/call", {"name": "check_messages", "arguments": {"recipient": "bob"}})
        assert [m["content"] for m in reply["result"]["structuredContent"]["result"]] == [f"m{i}" for i in range(1, 9)]
        # Each call may run on a fresh worker thread, but retired threads' connections are closed:
        # at most the main thread's, the current worker's and one retiring (db + wal + shm each).
        assert max(counts) <= 9, counts
        assert app.db.open_connections() <= 3
    finally:
        to_server.close()
        server.join(timeout=30)
        app.db.close()
    assert db_fds(path) == 0
