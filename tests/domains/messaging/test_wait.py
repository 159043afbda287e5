"""`vantage-peers wait` as a subprocess: wakes on another process's send, times out with exit 3, digest ≤ 1 KB."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from vantage_peers.db import open_database
from vantage_peers.domains.messaging import store as messages
from vantage_peers.domains.messaging.delivery import redeliver_due, require_ack

pytestmark = [pytest.mark.backends, pytest.mark.slow]  # slow: every test runs `vantage-peers wait` processes


def env_for(target, who="bob", **extra):
    """The environment of a `wait` process on the test's file, or its PostgreSQL database."""
    where = {"VP_DATABASE_URL": target} if str(target).startswith("postgresql://") else {"VP_DB_PATH": str(target)}
    return {**os.environ, **where, "VP_ORCHESTRATOR": who, "VP_EMBEDDINGS": "none", **extra}


def wait_cmd(*args):
    return [sys.executable, "-m", "vantage_peers.cli", "wait", *args]


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    """Where a `wait` without --state keeps its default state file: the test's folder, not the user's."""
    monkeypatch.setenv("VP_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture
def db(settings):
    d = open_database(settings)
    yield d
    d.close()


def send(db, to="bob", text="hello", sender="alice"):
    return db.write(lambda c: messages.send_message(c, sender=sender, channel=to, content=text))


def test_wait_times_out_with_exit_3(db, db_target, tmp_path):
    send(db, text="old news")  # pending before the waiter starts: new by default, not with --since-now
    r = subprocess.run(wait_cmd("--timeout", "1", "--since-now"), env=env_for(db_target), capture_output=True,
                       timeout=60)
    assert r.returncode == 3 and r.stdout == b""
    r = subprocess.run(wait_cmd("--timeout", "1"), env=env_for(db_target), capture_output=True, timeout=60)
    assert r.returncode == 0 and b"old news" in r.stdout
    r = subprocess.run(wait_cmd("--timeout", "1"), env=env_for(db_target), capture_output=True, timeout=60)
    assert r.returncode == 3 and r.stdout == b""  # reported by the previous run
    r = subprocess.run(wait_cmd("--timeout", "0", "--for", "tasks"), env=env_for(db_target), capture_output=True,
                       timeout=60)
    assert r.returncode == 3


def test_wait_wakes_on_a_message_from_another_process(db, db_target, tmp_path):
    proc = subprocess.Popen(wait_cmd("--timeout", "60", "--json"), env=env_for(db_target), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    sent = []
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        sent.append(send(db, text=f"ping {len(sent)} " + "x" * 3000)["messageId"])  # long: the digest stays small
        send(db, to="carol", text="not for bob")
        time.sleep(0.5)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert len(out) <= 1025
    doc = json.loads(out)
    assert doc["orchestrator"] == "bob" and doc["count"] >= 1
    assert all(i["kind"] == "message" and i["from"] == "alice" and i["messageId"] in sent for i in doc["items"])
    assert "not for bob" not in doc["digest"] and "alice" in doc["digest"]


def test_state_file_reports_each_thing_once_and_redelivery_again(db, db_target, tmp_path):
    state = tmp_path / "state.json"
    base = ("--timeout", "0", "--state", str(state))
    sent = send(db, text="first")
    assert subprocess.run(wait_cmd(*base), env=env_for(db_target), capture_output=True).returncode == 0
    assert subprocess.run(wait_cmd(*base), env=env_for(db_target), capture_output=True).returncode == 3  # reported
    # An ack-required receipt that is redelivered is new again (deliveryAttempt 2).
    acked = send(db, text="ack me")
    db.write(lambda c: require_ack(c, message_id=acked["messageId"], timeout_ms=1, now=0, dead_after_ms=1,
                                   broadcast=False))
    r = subprocess.run(wait_cmd(*base), env=env_for(db_target), capture_output=True, text=True)
    assert r.returncode == 0 and acked["messageId"] in r.stdout and sent["messageId"] not in r.stdout
    db.write(lambda c: redeliver_due(c, now=10**13, max_attempts=5))
    r = subprocess.run(wait_cmd(*base), env=env_for(db_target), capture_output=True, text=True)
    assert r.returncode == 0 and "attempt 2" in r.stdout
    # A task assigned to bob is new; the same task is not new twice.
    db.write(lambda c: c.execute(
        "INSERT INTO tasks (id, title, assignedTo, priority, status, createdBy, createdAt, updatedAt) "
        "VALUES ('task_1', 'Fix the login', 'bob', 'high', 'todo', 'alice', 1, 1)"))
    r = subprocess.run(wait_cmd(*base, "--for", "tasks"), env=env_for(db_target), capture_output=True, text=True)
    assert r.returncode == 0 and "task_1" in r.stdout and "Fix the login" in r.stdout
    assert subprocess.run(wait_cmd(*base), env=env_for(db_target), capture_output=True).returncode == 3


def test_wait_refuses_bad_arguments(db_target, tmp_path):
    r = subprocess.run(wait_cmd("--for", "mail"), env=env_for(db_target), capture_output=True, text=True)
    assert r.returncode == 2 and "--for" in r.stderr
    env = env_for(db_target)
    env.pop("VP_ORCHESTRATOR")
    r = subprocess.run(wait_cmd("--timeout", "0"), env=env, capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and "VP_ORCHESTRATOR" in r.stderr


def test_many_waiters_on_one_file_all_wake_and_instance_targeting(db, db_target, tmp_path):
    procs = [subprocess.Popen(wait_cmd("--timeout", "90", "--state", str(tmp_path / f"s{i}.json")),
                              env=env_for(db_target, VP_INSTANCE_ID=f"bob-{i % 2}"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for i in range(6)]
    try:
        # Only instance bob-1 is addressed: the bob-0 waiters must not wake on it.
        only = db.write(lambda c: messages.send_message(c, sender="alice", channel="bob", content="for bob-1",
                                                        instance_id="bob-1"))["messageId"]
        outs = {}
        for i in (1, 3, 5):
            out, err = procs[i].communicate(timeout=90)
            assert procs[i].returncode == 0, err
            outs[i] = out.decode()
        assert all(only in o for o in outs.values())
        assert all(procs[i].poll() is None for i in (0, 2, 4))
        role = send(db, text="for every instance")["messageId"]
        for i in (0, 2, 4):
            out, err = procs[i].communicate(timeout=90)
            assert procs[i].returncode == 0 and role in out.decode() and only not in out.decode(), err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
