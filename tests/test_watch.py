"""db/watch.py: a Watcher sees commits made by other OS processes on the same file."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from vantage_peers.db import Database, migrate
from vantage_peers.db.watch import Watcher

# Another process committing with plain SQLite (apsw), one transaction per row.
WRITE = """
import sys, apsw
conn = apsw.Connection(sys.argv[1])
conn.set_busy_timeout(10000)
for i in range(int(sys.argv[2])):
    conn.execute("BEGIN IMMEDIATE; INSERT INTO meta (key, value) VALUES (?, 'x'); COMMIT", (f"{sys.argv[3]}-{i}",))
conn.close()
"""


def _writer(path, n: int, tag: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WRITE, str(path), str(n), tag], check=True, timeout=120)


def test_changed_reports_each_commit_of_another_process_once(tmp_path):
    path = tmp_path / "w.db"
    db = Database(path)
    migrate(db)
    watcher = Watcher(str(path), interval=0.05)
    try:
        assert watcher.changed() is False
        _writer(path, 1, "a")
        assert watcher.changed() is True
        assert watcher.changed() is False  # reported once
        db.read(lambda c: c.scalar("SELECT count(*) FROM meta"))  # a read is not a change
        assert watcher.changed() is False
        db.write(lambda c: c.execute("INSERT INTO meta (key, value) VALUES ('local', 'x')"))
        assert watcher.changed() is True  # another connection of this process counts too
    finally:
        watcher.close()
        db.close()


def test_wait_wakes_on_a_commit_and_times_out_without_one(tmp_path):
    path = tmp_path / "w.db"
    db = Database(path)
    migrate(db)
    watcher = Watcher(str(path), interval=0.05)
    try:
        assert watcher.wait(0.2) is False
        woke: list[bool] = []
        t = threading.Thread(target=lambda: woke.append(watcher.wait(60)))
        t.start()
        time.sleep(0.2)
        _writer(path, 3, "b")
        t.join(60)
        assert woke == [True]
        # several processes writing at once: the watcher sees that something changed
        procs = [subprocess.Popen([sys.executable, "-c", WRITE, str(path), "20", f"p{i}"]) for i in range(3)]
        assert all(p.wait(120) == 0 for p in procs)
        assert watcher.changed() is True
        assert db.read(lambda c: c.scalar("SELECT count(*) FROM meta WHERE key LIKE 'p%'")) == 60
    finally:
        watcher.close()
        db.close()
    watcher.close()  # closing twice is harmless
