"""Several OS processes on one DB file (or one PostgreSQL database): nothing lost, nothing duplicated,
nothing corrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import apsw
import pytest

from vantage_peers.db import Database, migrate, open_target

SENDER = textwrap.dedent(
    """
    import sys, anyio
    from mcp import Client
    from vantage_peers.server import create_app
    from vantage_peers.pipeline.settings import Settings

    path, who, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    where = {"VP_DATABASE_URL": path} if path.startswith("postgresql://") else {"VP_DB_PATH": path}
    settings = Settings.from_env({**where, "VP_SCHEDULER": "off", "VP_EMBEDDINGS": "none"}, dotenv=False)
    app = create_app(settings)

    async def main():
        async with Client(app.mcp) as client:
            for i in range(count):
                channel = ["broadcast", "alice", "bob,carol"][i % 3]
                r = await client.call_tool("send_message", {"from": who, "channel": channel, "content": f"{who}:{i}"})
                assert not r.is_error, r.content

    anyio.run(main)
    """
)


def _prepare(path):
    db = open_target(str(path))
    migrate(db)
    for who in ("alice", "bob", "carol", "p0", "p1", "p2", "p3"):
        db.write(lambda c, who=who: c.execute(
            "INSERT INTO profiles (id, orchestratorId, createdAt, updatedAt) VALUES (?, ?, 0, 0)", (f"prf_{who}", who)))
    db.close()


@pytest.mark.backends
@pytest.mark.slow
def test_concurrent_senders_in_four_processes_deliver_exactly_once(db_target):
    path = db_target
    _prepare(path)
    per_process, procs = 30, 4
    children = [
        subprocess.Popen([sys.executable, "-c", SENDER, str(path), f"p{i}", str(per_process)],
                         stderr=subprocess.PIPE)
        for i in range(procs)
    ]
    for child in children:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err.decode()[-2000:]

    db = open_target(path)
    c = db.conn
    assert c.scalar("SELECT count(*) FROM messages") == per_process * procs
    contents = {r["content"] for r in c.query("SELECT content FROM messages")}
    assert contents == {f"p{p}:{i}" for p in range(procs) for i in range(per_process)}
    # broadcast: 7 profiles minus the sender = 6; direct: 1; "bob,carol": 2.
    expected = {"broadcast": 6, "alice": 1, "bob,carol": 2}
    for row in c.query("SELECT m.channel, count(r.id) AS n FROM messages m "
                       "LEFT JOIN messageReceipts r ON r.messageId = m.id GROUP BY m.id, m.channel"):
        assert row["n"] == expected[row["channel"]]
    dupes = c.query("SELECT messageId, recipient, count(*) FROM messageReceipts GROUP BY 1, 2 HAVING count(*) > 1")
    assert dupes == []
    if db.backend == "sqlite":
        assert c.scalar("PRAGMA integrity_check") == "ok"
    db.close()


WRITER = textwrap.dedent(
    """
    import sys
    from vantage_peers.db import Database
    from vantage_peers.domains.messaging import store

    db = Database(sys.argv[1])
    i = 0
    while True:
        db.write(lambda c: store.send_message(c, sender="w", channel="broadcast", content="x" * 20000 + str(i)))
        i += 1
    """
)


def test_process_killed_mid_write_leaves_file_consistent(tmp_path):
    path = tmp_path / "killed.db"
    _prepare(path)
    for _ in range(3):
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stderr=subprocess.PIPE)
        probe = apsw.Connection(str(path))
        probe.set_busy_timeout(5000)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if probe.execute("SELECT count(*) FROM messages").fetchall()[0][0] > 20:
                break
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        probe.close()

    db = Database(path)
    c = db.conn
    assert c.scalar("PRAGMA integrity_check") == "ok"
    assert c.scalar("SELECT count(*) FROM messages") > 0
    # Every committed message has all its receipts: a send is one transaction.
    orphans = c.query("SELECT m.id FROM messages m LEFT JOIN messageReceipts r ON r.messageId = m.id "
                      "GROUP BY m.id HAVING count(r.id) != 7")
    assert orphans == []
    # The FTS index agrees with the table.
    assert c.scalar("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'x'") is not None
    c.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
    db.close()
