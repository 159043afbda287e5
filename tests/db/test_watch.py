"""db/watch.py: a commit from another process is seen; an idle file is not; many watchers are fine."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from vantage_peers.db import Database, migrate
from vantage_peers.db.watch import Watcher

WRITE = ("import sys, apsw; c = apsw.Connection(sys.argv[1]); c.set_busy_timeout(5000); "
         "c.execute(\"INSERT INTO instances (id, orchestratorId, lastSeen, createdAt) VALUES (?1, ?1, 1, 1)\", "
         "(sys.argv[2],))")


def make(tmp_path, journal_mode="wal"):
    path = tmp_path / "w.db"
    db = Database(path, journal_mode=journal_mode)
    migrate(db)
    db.close()
    return str(path)


@pytest.mark.parametrize("journal_mode", ["wal", "delete"])
def test_changed_sees_another_process_commit_once(tmp_path, journal_mode):
    path = make(tmp_path, journal_mode)
    with Watcher(path, interval=0.05) as w:
        assert w.changed() is False
        subprocess.run([sys.executable, "-c", WRITE, path, "i1"], check=True)
        assert w.changed() is True
        assert w.changed() is False  # reported once
        assert w.wait(0.2) is False  # nothing new: times out
        subprocess.run([sys.executable, "-c", WRITE, path, "i2"], check=True)
        assert w.wait(5) is True


def test_wait_wakes_on_a_commit_in_this_process_other_connection(tmp_path):
    path = make(tmp_path)
    db = Database(path)
    watchers = [Watcher(path, interval=0.05) for _ in range(20)]  # many watchers on one file
    woke: list[bool] = []
    threads = [threading.Thread(target=lambda w=w: woke.append(w.wait(10))) for w in watchers]
    for t in threads:
        t.start()
    time.sleep(0.2)
    db.write(lambda c: c.execute("INSERT INTO instances (id, orchestratorId, lastSeen, createdAt) "
                                 "VALUES ('i', 'y', 1, 1)"))
    for t in threads:
        t.join(15)
    assert woke == [True] * 20
    for w in watchers:
        w.close()
    db.close()


def test_close_releases_a_blocked_wait(tmp_path):
    w = Watcher(make(tmp_path), interval=0.05)
    out: list[bool] = []
    t = threading.Thread(target=lambda: out.append(w.wait(None)))
    t.start()
    time.sleep(0.1)
    w.close()
    t.join(5)
    assert out == [False] and w.changed() is False


def test_a_missing_file_is_an_error_not_a_new_file(tmp_path):
    missing = tmp_path / "nope.db"
    with pytest.raises(Exception):  # noqa: B017 - apsw.CantOpenError
        Watcher(str(missing))
    assert not missing.exists()
