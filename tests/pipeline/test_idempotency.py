"""Idempotent retries on every create/send tool: the same key gives the first result and writes nothing
twice — even when the process died between its commit and its reply."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest
from conftest import make_settings, open_tools
from support.migration_helpers import older_file

from vantage_peers.db import table_names
from vantage_peers.pipeline import idempotency
from vantage_peers.server import create_app

pytestmark = pytest.mark.backends

CREATES = ("create_", "send_", "store_", "register_", "add_fix_attempt", "instantiate_")


def row_counts(app) -> dict[str, int]:
    """Rows per table (FTS shadow tables and the key table itself left out): what a duplicate would grow."""
    names = [n for n in app.db.read(table_names) if n != "idempotencyKeys"]
    return {n: app.db.read(lambda c, n=n: c.scalar(f"SELECT count(*) FROM {n}")) for n in names}


@pytest.fixture
def team(tmp_path, database_url):
    app = create_app(make_settings(tmp_path / "idem.db", orchestrator="alice", database_url=database_url))
    with open_tools(app) as tools:
        yield app, tools
    app.db.close()


def arguments(tools, name: str) -> dict[str, Any]:
    """Valid arguments for each create/send tool (a test fails below when a new one is not listed)."""
    tag = uuid.uuid4().hex[:8]
    if name in ("add_fix_attempt",):
        pattern = tools.call("create_fix_pattern", symptom="s", rootCause="r", sourceProject="p")
        return {"patternId": pattern.get("patternId") or pattern.get("_id") if isinstance(pattern, dict) else pattern,
                "description": "tried",
                "worked": False, "why": "no"}
    if name == "instantiate_template_into_mission":
        mission = tools.call("create_mission", name=f"m {tag}", project="p", pilot="alice", priority="low",
                             status="plan", agents=["alice"])
        return {"missionId": mission if isinstance(mission, str) else mission["missionId"],
                "templateName": "issue-resolution-v3"}
    return {
        "send_message": {"channel": "bob", "content": f"hello {tag}"},
        "create_task": {"title": f"t {tag}", "assignedTo": "bob", "priority": "low"},
        "create_mission": {"name": f"m {tag}", "project": "p", "pilot": "alice", "priority": "low",
                           "status": "plan", "agents": ["alice"]},
        "create_fix_pattern": {"symptom": f"s {tag}", "rootCause": "r", "sourceProject": "p"},
        "create_briefing_note": {"title": tag, "topic": "project/p", "participants": ["alice"], "content": "c"},
        "create_bu": {"name": f"bu {tag}", "description": "d", "purpose": "p", "orchestratorId": "alice"},
        "create_mandate": {"service": tag, "budget": 5, "fulfilledBy": "bob"},
        "create_recurring_task": {"title": tag, "assignedTo": "bob", "cronExpression": "0 9 * * *"},
        "create_iframe_session": {"sessionId": str(uuid.uuid4()), "origin": "https://a.example",
                                  "expiresAt": int(time.time() * 1000) + 3_600_000},
        "store_memory": {"namespace": "project/p", "type": "note", "content": f"remember {tag}"},
        "store_episode": {"namespace": "project/p", "context": "c", "goal": "g", "action": "a", "outcome": "o",
                          "insight": tag, "severity": "low"},
        "register_component": {"name": f"c-{tag}", "type": "skill", "content": "# c"},
    }[name]


def test_every_create_or_send_tool_declares_idempotency(team):
    app, tools = team
    for name, reg in app.registered.items():
        if not reg.policy.read_only and name.startswith(CREATES):
            assert reg.policy.idempotent, f"{name} creates or sends: declare idempotent=True"
        if reg.policy.idempotent:
            assert "idempotencyKey" in tools.listed[name].input_schema["properties"], name


def test_a_retry_with_the_same_key_returns_the_first_result_and_writes_nothing(team):
    app, tools = team
    declared = [n for n, r in app.registered.items() if r.policy.idempotent]
    assert len(declared) >= 14
    for name in declared:
        args = arguments(tools, name)
        key = str(uuid.uuid4())
        first = tools.call(name, **args, idempotencyKey=key)
        before = row_counts(app)
        again = tools.call(name, **args, idempotencyKey=key)
        assert again == first, name
        assert row_counts(app) == before, f"{name} wrote again on a retry"
        other = tools.error(name, **{**args, **_changed(args)}, idempotencyKey=key)
        assert "IDEMPOTENCY_CONFLICT" in other, (name, other)
        fresh = arguments(tools, name)  # a new operation with a new key: written
        before = row_counts(app)
        assert tools.call(name, **fresh, idempotencyKey=str(uuid.uuid4())) != first, name
        assert row_counts(app) != before, name


def _changed(args: dict[str, Any]) -> dict[str, Any]:
    """The same call with one text argument changed."""
    for k, v in args.items():
        if isinstance(v, str) and k not in ("sessionId", "origin", "missionId", "patternId", "templateName",
                                            "namespace", "type", "severity", "priority", "status", "topic",
                                            "cronExpression"):
            return {k: v + " (changed)"}
    if "expiresAt" in args:
        return {"expiresAt": args["expiresAt"] + 1}
    if "templateName" in args:
        return {"titlePrefix": "RETRY"}
    raise AssertionError(f"no argument to change in {args}")


def test_keys_belong_to_their_caller_and_expire(team, tmp_path):
    app, tools = team
    key = "shared-key"
    mine = tools.call("send_message", channel="bob", content="one", idempotencyKey=key)
    theirs = tools.call("send_message", channel="bob", content="one", idempotencyKey=key, **{"from": "carol"})
    assert mine["messageId"] != theirs["messageId"]
    payload = idempotency.digest("send_message", {"x": 1})
    later = int(time.time() * 1000) + idempotency.TTL_MS + 1
    assert app.db.read(lambda c: idempotency.replay(c, caller="alice", key=key, tool="send_message",
                                                    payload=payload, now=later)) is idempotency.MISSING
    assert "IDEMPOTENCY_CONFLICT" in tools.error("send_message", channel="bob", content="two", idempotencyKey=key)
    assert app.db.write(lambda c: idempotency.expire(c, now=later)) == 2


@pytest.mark.parametrize("bad", ["", " ", "k" * 201])
def test_bad_keys_are_refused(team, bad):
    app, tools = team
    assert "INVALID_ARGUMENT" in tools.error("send_message", channel="bob", content="x", idempotencyKey=bad)
    assert "INVALID_ARGUMENT" in tools.error("send_message", channel="bob", content="x", idempotencyKey=5)


WORKER = r'''
import json, os, signal, sys
import anyio
from mcp import Client
from vantage_peers.server import create_app
from vantage_peers.pipeline.settings import Settings

where = {"VP_DATABASE_URL" if sys.argv[1].startswith("postgresql://") else "VP_DB_PATH": sys.argv[1]}
env = {**where, "VP_SCHEDULER": "off", "VP_EMBEDDINGS": "none", "VP_ORCHESTRATOR": "alice"}
app = create_app(Settings.from_env(env, dotenv=False))
die = sys.argv[2] == "die"
if die:
    # The reply is lost: the process is killed right after the call's transaction commits.
    original = app.db.write
    def write_then_die(fn):
        result = original(fn)
        os.kill(os.getpid(), signal.SIGKILL)
        return result
    app.db.write = write_then_die

async def main():
    async with Client(app.mcp) as client:
        r = await client.call_tool("send_message", {"channel": "bob", "content": "exactly once",
                                                    "idempotencyKey": "retry-after-kill"})
        print(json.dumps(r.structured_content))

anyio.run(main)
'''


@pytest.mark.slow
def test_a_kill_between_commit_and_reply_then_a_retry_writes_one_row(db_path, database_url, db_target):
    db = db_path
    create_app(make_settings(db, database_url=database_url)).db.close()
    env = {k: v for k, v in os.environ.items() if k != "VP_ORCHESTRATOR"}
    killed = subprocess.run([sys.executable, "-c", WORKER, db_target, "die"], capture_output=True, text=True,
                            env=env, timeout=120)
    assert killed.returncode == -signal.SIGKILL and not killed.stdout.strip()
    retried = subprocess.run([sys.executable, "-c", WORKER, db_target, "retry"], capture_output=True, text=True,
                             env=env, timeout=120)
    assert retried.returncode == 0, retried.stderr
    result = json.loads(retried.stdout)
    app = create_app(make_settings(db, database_url=database_url))
    try:
        assert app.db.read(lambda c: c.scalar("SELECT count(*) FROM messages WHERE content = 'exactly once'")) == 1
        stored = app.db.read(lambda c: c.scalar("SELECT id FROM messages WHERE content = 'exactly once'"))
        assert result["messageId"] == stored
    finally:
        app.db.close()


def test_migration_018_upgrades_an_older_file(tmp_path):
    """A version-16 file with a message upgrades in place: the message is kept and keys work."""
    from vantage_peers.db import latest_version

    path = older_file(tmp_path / "v16.db", 16, "INSERT INTO messages (id, sender, channel, content, createdAt) "
                                               "VALUES ('msg_old', 'pi', 'bob', 'kept', 1)")
    app = create_app(make_settings(path, orchestrator="alice"))
    try:
        assert app.db.conn.scalar("PRAGMA user_version") == latest_version() >= 18
        assert app.db.conn.scalar("SELECT content FROM messages WHERE id = 'msg_old'") == "kept"
        with open_tools(app) as tools:
            first = tools.call("send_message", channel="bob", content="after", idempotencyKey="k1")
            assert tools.call("send_message", channel="bob", content="after", idempotencyKey="k1") == first
    finally:
        app.db.close()
