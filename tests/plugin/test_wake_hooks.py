"""The plugin's wake-up hooks as subprocesses fed Claude Code's hook JSON, against a real database.

inbox-digest (SessionStart, UserPromptSubmit): additionalContext only when something is new.
wake-on-message (Stop, asyncRewake): exit 2 + digest on stderr when something arrives, else 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import make_settings
from support.plugin_helpers import HOOKS

from vantage_peers.db import open_database
from vantage_peers.domains.messaging import store as messages

pytestmark = pytest.mark.slow  # every test runs the hook scripts as processes


@pytest.fixture
def db(db_path):
    d = open_database(make_settings(db_path))
    yield d
    d.close()


@pytest.fixture
def env(db_path, tmp_path):
    return {**os.environ, "VP_DB_PATH": str(db_path), "VP_ORCHESTRATOR": "bob", "VP_EMBEDDINGS": "none",
            "VP_HOOK_STATE_DIR": str(tmp_path / "state"), "VP_WAKE_COMMAND": f"{sys.executable} -m vantage_peers.cli",
            "VP_HOOK_TIMEOUT_SECONDS": "30"}


def hook_event(name, session="sess-1", **extra):
    base = {"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp", "hook_event_name": name}
    if name == "SessionStart":
        base["source"] = "startup"
    if name == "UserPromptSubmit":
        base["prompt"] = "carry on"
    if name == "Stop":
        base["stop_hook_active"] = False
    return {**base, **extra}


def run(script, payload, env, **kw):
    return subprocess.run([sys.executable, str(HOOKS / f"{script}.py")], input=json.dumps(payload).encode(),
                          capture_output=True, env=env, timeout=120, **kw)


def send(db, text, to="bob"):
    return db.write(lambda c: messages.send_message(c, sender="alice", channel=to, content=text))["messageId"]


def test_digest_hooks_add_context_only_for_new_things(db, env):
    r = run("inbox-digest", hook_event("SessionStart"), env)
    assert r.returncode == 0 and r.stdout == b""
    mid = send(db, "please review PR 12")
    r = run("inbox-digest", hook_event("SessionStart"), env)
    out = json.loads(r.stdout)["hookSpecificOutput"]
    assert r.returncode == 0 and out["hookEventName"] == "SessionStart"
    assert mid in out["additionalContext"] and "please review PR 12" in out["additionalContext"]
    assert len(out["additionalContext"].encode()) <= 1024
    r = run("inbox-digest", hook_event("UserPromptSubmit"), env)
    assert r.returncode == 0 and r.stdout == b""  # already in this session's context
    # Another session of the same agent has not seen it yet.
    r = run("inbox-digest", hook_event("UserPromptSubmit", session="sess-2"), env)
    assert json.loads(r.stdout)["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    db.write(lambda c: c.execute(
        "INSERT INTO tasks (id, title, assignedTo, priority, status, createdBy, createdAt, updatedAt) "
        "VALUES ('task_9', 'Ship the release', 'bob', 'urgent', 'todo', 'alice', 1, 1)"))
    r = run("inbox-digest", hook_event("UserPromptSubmit"), env)
    ctx = json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "task_9" in ctx and mid not in ctx
    # A compaction emptied the context: everything pending is shown again; a resume is not.
    assert run("inbox-digest", hook_event("SessionStart", source="resume"), env).stdout == b""
    ctx = json.loads(run("inbox-digest", hook_event("SessionStart", source="compact"), env).stdout)
    assert mid in ctx["hookSpecificOutput"]["additionalContext"] and "task_9" in ctx["hookSpecificOutput"][
        "additionalContext"]


def test_stop_hook_wakes_with_exit_2_when_a_message_arrives_and_not_on_its_own_output(db, env):
    env = {**env, "VP_WAKE_CHUNK_SECONDS": "2", "VP_WAKE_TIMEOUT_SECONDS": "90"}
    proc = subprocess.Popen([sys.executable, str(HOOKS / "wake-on-message.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdin.write(json.dumps(hook_event("Stop")).encode())
    proc.stdin.close()
    time.sleep(1)
    assert proc.poll() is None  # nothing new: it keeps waiting
    mid = send(db, "are you there?")
    assert proc.wait(timeout=60) == 2
    err = proc.stderr.read().decode()
    proc.stdout.close()
    proc.stderr.close()
    assert mid in err and "alice" in err and len(err.encode()) <= 1025
    # The woken session stops again: the same message does not wake it a second time.
    quiet = {**env, "VP_WAKE_TIMEOUT_SECONDS": "2"}
    r = run("wake-on-message", hook_event("Stop", stop_hook_active=True), quiet)
    assert r.returncode == 0 and r.stderr == b"" and r.stdout == b""
    # Something else is new: exit 2 at once (it arrived while the session was busy).
    mid2 = send(db, "second")
    r = run("wake-on-message", hook_event("Stop"), quiet)
    assert r.returncode == 2 and mid2 in r.stderr.decode() and mid not in r.stderr.decode()


def test_a_user_prompt_supersedes_the_sleeping_stop_hook(db, env):
    env = {**env, "VP_WAKE_CHUNK_SECONDS": "1", "VP_WAKE_TIMEOUT_SECONDS": "90"}
    proc = subprocess.Popen([sys.executable, str(HOOKS / "wake-on-message.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdin.write(json.dumps(hook_event("Stop")).encode())
    proc.stdin.close()
    state = Path(env["VP_HOOK_STATE_DIR"])
    deadline = time.monotonic() + 60
    while not list(state.glob("*.sleeper")) and time.monotonic() < deadline:  # the waiter has registered
        time.sleep(0.05)
    run("inbox-digest", hook_event("UserPromptSubmit"), env)
    assert proc.wait(timeout=60) == 0
    assert proc.stderr.read() == b""
    proc.stdout.close()
    proc.stderr.close()


def test_opt_out_and_fail_open(db, env):
    send(db, "hello")
    for bad in ({"VP_WAKE_HOOKS": "off"}, {"VP_WAKE_COMMAND": "/nonexistent/vantage-peers"},
                {"VP_ORCHESTRATOR": ""}, {"VP_DB_PATH": "/proc/no/such.db"}):
        for script, name in (("inbox-digest", "SessionStart"), ("inbox-digest", "UserPromptSubmit"),
                             ("wake-on-message", "Stop")):
            r = run(script, hook_event(name), {**env, **bad, "VP_WAKE_TIMEOUT_SECONDS": "1"})
            assert (r.returncode, r.stdout, r.stderr) == (0, b"", b""), (bad, script)
    r = subprocess.run([sys.executable, str(HOOKS / "inbox-digest.py")], input=b"not json", capture_output=True,
                       env=env, timeout=60)
    assert r.returncode == 0 and r.stdout == b""
