"""`vantage-peers wait` as the README runs it (no `--state`) never sleeps through what is there (#30, #32 item 8).

Real `wait` processes on SQLite and PostgreSQL: what is pending when it starts is reported at once,
a default state file per (database, orchestrator, instance) keeps a later `wait` from reporting it
again (a redelivery is new), it says when it is armed (stderr, `--ready-fd`), and a bad `--state`,
`--timeout` or `--ready-fd` is one line and exit 2, with no traceback and no `.tmp` left behind.
No wall-clock assertion: outcomes and order only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from vantage_peers.domains.messaging import inbox
from vantage_peers.domains.messaging import store as messages
from vantage_peers.domains.messaging.delivery import redeliver_due, require_ack

pytestmark = pytest.mark.backends

ARMED = b"vantage-peers wait: armed (orchestrator bob, messages,tasks)\n"
LONG = "120"  # a generous --timeout: a passing test returns long before it


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    """The default state files of this test's waiters (never the user's own state folder)."""
    folder = tmp_path / "state"
    monkeypatch.setenv("VP_STATE_DIR", str(folder))
    return folder


def env_for(target, who="bob", **extra):
    where = {"VP_DATABASE_URL": target} if str(target).startswith("postgresql://") else {"VP_DB_PATH": str(target)}
    env = {**os.environ, **where, "VP_ORCHESTRATOR": who, "VP_EMBEDDINGS": "none", **extra}
    if "VP_INSTANCE_ID" not in extra:
        env.pop("VP_INSTANCE_ID", None)
    return env


def wait_cmd(*args):
    return [sys.executable, "-m", "vantage_peers.cli", "wait", *args]


def wait(target, *args, who="bob", **extra):
    return subprocess.run(wait_cmd(*args), env=env_for(target, who, **extra), capture_output=True, text=True,
                          timeout=300)


def send(db, to="bob", text="hello", sender="alice"):
    return db.write(lambda c: messages.send_message(c, sender=sender, channel=to, content=text))


def add_task(db, task_id, title, to="bob"):
    db.write(lambda c: c.execute(
        "INSERT INTO tasks (id, title, assignedTo, priority, status, createdBy, createdAt, updatedAt) "
        "VALUES (?, ?, ?, 'high', 'todo', 'alice', 1, 1)", (task_id, title, to)))


def no_litter(*folders):
    return [p for f in folders if f.exists() for p in f.rglob("*.tmp")]


def test_what_is_pending_when_wait_starts_is_reported_at_once(db, db_target):
    sent = send(db, text="landed while wait was starting")
    r = wait(db_target, "--timeout", LONG)  # as the README runs it: no flag
    assert r.returncode == 0, r.stderr
    assert sent["messageId"] in r.stdout and "landed while wait was starting" in r.stdout
    assert "armed" not in r.stderr  # it never had to block
    add_task(db, "task_pending", "Already assigned")
    r = wait(db_target, "--timeout", LONG, "--for", "tasks")
    assert r.returncode == 0 and "task_pending" in r.stdout, r.stderr


def test_the_agent_loop_is_told_once_per_receipt_and_again_on_redelivery(db, db_target, state_dir):
    first = send(db, text="first")
    r = wait(db_target, "--timeout", LONG)
    assert r.returncode == 0 and first["messageId"] in r.stdout, r.stderr
    # Still unread (the agent has only looked): already reported, so the next wait keeps waiting.
    assert wait(db_target, "--timeout", "1").returncode == 3
    # The agent marks it read (mark_as_read), as the instructions say: nothing new either.
    receipts = db.read(lambda c: c.rows("SELECT id FROM messageReceipts WHERE messageId = ?", (first["messageId"],)))
    db.write(lambda c: messages.mark_as_read(c, receipt_ids=[r[0] for r in receipts]))
    assert wait(db_target, "--timeout", "1").returncode == 3
    # An ackRequired message: reported once; its redelivery (deliveryAttempt 2) is new again.
    acked = send(db, text="ack me")
    db.write(lambda c: require_ack(c, message_id=acked["messageId"], timeout_ms=1, now=0, dead_after_ms=1,
                                   broadcast=False))
    r = wait(db_target, "--timeout", LONG)
    assert r.returncode == 0 and acked["messageId"] in r.stdout and first["messageId"] not in r.stdout
    assert "attempt 1" in r.stdout
    assert wait(db_target, "--timeout", "1").returncode == 3
    db.write(lambda c: redeliver_due(c, now=10**13, max_attempts=5))
    r = wait(db_target, "--timeout", LONG)
    assert r.returncode == 0 and acked["messageId"] in r.stdout and "attempt 2" in r.stdout, r.stderr
    assert wait(db_target, "--timeout", "1").returncode == 3
    assert no_litter(state_dir) == [] and len(list((state_dir / "wait").glob("*.json"))) == 1


def test_armed_on_stderr_then_a_message_sent_right_after_wakes_it(db, db_target):
    for n in range(2):
        proc = subprocess.Popen(wait_cmd("--timeout", LONG), env=env_for(db_target), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        try:
            assert proc.stderr.readline() == ARMED  # blocks until the waiter is armed
            sent = send(db, text=f"right after armed {n}")  # no pause: it must not be missed
            out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, err
        assert sent["messageId"] in out.decode() and b"Traceback" not in err


def test_ready_fd_says_ready_once_armed_and_only_then(db, db_target):
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(wait_cmd("--timeout", LONG, "--ready-fd", str(write_end), "--json"),
                            env=env_for(db_target), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            pass_fds=(write_end,))
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as ready:
            assert ready.read() == b"ready\n"  # written, then closed by the waiter: EOF while it still waits
        assert proc.poll() is None
        sent = send(db, text="after ready")
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and sent["messageId"] in out.decode()
    assert err.startswith(ARMED)
    # Something already pending: it returns at once without arming, and the fd only closes (EOF).
    pending_now = send(db, text="already there")
    read_end, write_end = os.pipe()
    r = subprocess.run(wait_cmd("--timeout", LONG, "--ready-fd", str(write_end)), env=env_for(db_target),
                       capture_output=True, pass_fds=(write_end,), timeout=300)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as ready:
        assert ready.read() == b""
    assert r.returncode == 0 and pending_now["messageId"] in r.stdout.decode() and b"armed" not in r.stderr


def test_bad_state_timeout_or_ready_fd_is_exit_2_with_one_line_and_no_litter(db_target, tmp_path, state_dir):
    folder = tmp_path / "folder"
    folder.mkdir()
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    cases = [
        (("--state", str(folder)), "is a directory"),
        (("--state", str(a_file / "state.json")), "not a folder"),
        (("--timeout", "nan"), "--timeout"),
        (("--timeout", "inf"), "--timeout"),
        (("--timeout", "-1"), "--timeout"),
        (("--timeout", "soon"), "--timeout"),
        (("--for", "mail"), "--for"),
        (("--ready-fd", "1"), "--ready-fd"),
        (("--ready-fd", "987"), "--ready-fd"),
        (("--since-now", "--state", str(tmp_path / "s.json")), "--since-now"),
    ]
    for args, said in cases:
        r = wait(db_target, *args, *([] if "--timeout" in args else ["--timeout", "0"]))
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert said in r.stderr and "Traceback" not in r.stderr and r.stdout == "", (args, r.stderr)
    assert list(folder.iterdir()) == [] and no_litter(tmp_path) == []
    # VP_STATE_DIR naming a file: the default state file cannot live there either.
    r = wait(db_target, "--timeout", "0", VP_STATE_DIR=str(a_file))
    assert r.returncode == 2 and "VP_STATE_DIR" in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes anywhere")
def test_state_in_a_folder_that_cannot_be_written_is_exit_2(db_target, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        r = wait(db_target, "--timeout", "0", "--state", str(locked / "state.json"))
    finally:
        locked.chmod(0o700)
    assert r.returncode == 2 and "not writable" in r.stderr and "Traceback" not in r.stderr
    assert no_litter(tmp_path) == []


def test_the_default_state_is_per_orchestrator_and_instance(db, db_target, state_dir):
    to_alice = send(db, to="alice", sender="carol", text="for alice")
    to_bob = send(db, to="bob", sender="carol", text="for bob")
    r = wait(db_target, "--timeout", LONG, who="bob")
    assert r.returncode == 0 and to_bob["messageId"] in r.stdout and to_alice["messageId"] not in r.stdout
    # bob's report did not consume alice's.
    r = wait(db_target, "--timeout", LONG, who="alice")
    assert r.returncode == 0 and to_alice["messageId"] in r.stdout and to_bob["messageId"] not in r.stdout
    assert wait(db_target, "--timeout", "0", who="bob").returncode == 3
    assert wait(db_target, "--timeout", "0", who="alice").returncode == 3
    # Another instance of bob keeps its own file: the message to the whole role is new to it.
    r = wait(db_target, "--timeout", LONG, who="bob", VP_INSTANCE_ID="bob-2")
    assert r.returncode == 0 and to_bob["messageId"] in r.stdout
    assert len(list((state_dir / "wait").glob("wait-*.json"))) == 3 and no_litter(state_dir) == []


def test_since_now_keeps_only_what_arrives_after_the_start(db, db_target, state_dir):
    old = send(db, text="old news")
    assert wait(db_target, "--since-now", "--timeout", "0").returncode == 3
    proc = subprocess.Popen(wait_cmd("--since-now", "--timeout", LONG), env=env_for(db_target),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stderr.readline() == ARMED
        fresh = send(db, text="fresh")
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and fresh["messageId"] in out.decode() and old["messageId"] not in out.decode()
    assert not state_dir.exists()  # --since-now keeps no state
    # The default still reports the old one (and the fresh one): --since-now consumed nothing.
    r = wait(db_target, "--timeout", LONG)
    assert r.returncode == 0 and old["messageId"] in r.stdout and fresh["messageId"] in r.stdout


def test_sigterm_while_waiting_exits_cleanly(db_target, state_dir):
    proc = subprocess.Popen(wait_cmd("--timeout", LONG), env=env_for(db_target), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stderr.readline() == ARMED
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM and out == b"" and b"Traceback" not in err
    assert no_litter(state_dir) == []


def test_a_new_kind_is_one_registry_entry(db, tmp_path, monkeypatch):
    """What another engineer adds for `work` (tasks any worker may claim): a reader, a line, one entry."""
    from vantage_peers.wake import parse_kinds, wait_for_new

    work = inbox.Kind("work", "work:", "work", "{} open work item(s)", "list_tasks",
                      lambda c, who, instance: [{"kind": "work", "key": "work:w1", "taskId": "w1", "from": "alice",
                                                 "text": "anyone may claim this", "priority": "low"}],
                      lambda i: f"work {i['taskId']} [{i['priority']}] from {i['from']}: {i['text']}")
    monkeypatch.setitem(inbox.REGISTRY, "work", work)
    monkeypatch.setattr(inbox, "KINDS", (*inbox.KINDS, "work"))
    monkeypatch.setattr(inbox, "PREFIX", {**inbox.PREFIX, "work": "work:"})
    assert parse_kinds("messages,work") == ("messages", "work")
    state = tmp_path / "s.json"
    new = wait_for_new(db, who="bob", instance=None, kinds=("messages", "work"), timeout=0, state=state)
    assert [i["key"] for i in new] == ["work:w1"]
    text = inbox.digest(new, "bob")
    assert "1 open work item(s)" in text and "- work w1 [low] from alice: anyone may claim this" in text
    assert wait_for_new(db, who="bob", instance=None, kinds=("work",), timeout=0, state=state) is None


@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(os, "getuid"),
                    reason="XDG_STATE_HOME and TMPDIR steer platformdirs and tempfile on Linux")
def test_an_unwritable_state_folder_falls_back_to_a_private_temp_folder(db, db_target, tmp_path, monkeypatch):
    """A sandboxed agent (no write access to ~/.local/state) still gets the default semantics."""
    monkeypatch.delenv("VP_STATE_DIR")
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    temp = tmp_path / "tmp"
    temp.mkdir()
    sent = send(db, text="sandboxed")
    where = {"XDG_STATE_HOME": str(a_file / "state"), "TMPDIR": str(temp)}
    r = wait(db_target, "--timeout", LONG, **where)
    assert r.returncode == 0 and sent["messageId"] in r.stdout, r.stderr
    assert wait(db_target, "--timeout", "0", **where).returncode == 3  # remembered there
    private = temp / f"vantage-peers-state-{os.getuid()}"
    assert private.stat().st_mode & 0o777 == 0o700 and len(list((private / "wait").glob("wait-*.json"))) == 1
