"""Server push over streamable HTTP (#31): GET /mcp as an event stream carries
`notifications/resources/updated` for the token's own inbox and tasks, resumable with
`Last-Event-ID` (ids derived from the database, so any replica understands them); `vantage-peers
wait --url` wakes through it. From the attacker's side too: a token never hears another identity."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from support.http_helpers import MASTER, scoped_token, script, serving
from support.push_helpers import Stream, call, profile, read_resource

pytestmark = pytest.mark.backends
INBOX, TASKS = "vp://inbox/bob", "vp://tasks/bob"


@pytest.fixture
def world(tmp_path, database_url):
    env = {"VP_EMBEDDINGS": "none", **({"VP_DATABASE_URL": database_url} if database_url else {})}
    with serving(tmp_path / "vp.db", env=env) as server:
        tokens = {who: scoped_token(server, profile(who)) for who in ("alice", "bob", "carol")}
        yield server, tokens


def test_a_stream_hears_its_own_inbox_and_tasks_and_nothing_of_anyone_else(world):
    server, tokens = world
    bob, carol = Stream(server.url, tokens["bob"]), Stream(server.url, tokens["carol"])
    try:
        assert bob.status == carol.status == 200
        bob.primed()
        carol.primed()
        call(server.url, tokens["alice"], "send_message", channel="bob", content="for bob only", **{"from": "alice"})
        bob.wait_for(lambda: INBOX in bob.uris())
        call(server.url, tokens["alice"], "create_task", title="bob's job", priority="high", createdBy="alice",
             assignedTo="bob")
        bob.wait_for(lambda: TASKS in bob.uris())
        # carol's own message afterwards: when it shows up, everything before it has been processed
        call(server.url, tokens["alice"], "send_message", channel="carol", content="for carol", **{"from": "alice"})
        carol.wait_for(lambda: "vp://inbox/carol" in carol.uris())
        assert all(u.endswith("/carol") for u in carol.uris()), carol.events
        assert all(u.endswith("/bob") for u in bob.uris()), bob.events
        # every event id is resumable: v1.<inbox>.<tasks>
        assert all(i and i.startswith("v1.") and len(i.split(".")) == 3 for _, i, _ in bob.events)
    finally:
        bob.close()
        carol.close()


def test_a_token_cannot_open_another_identitys_stream(world):
    server, tokens = world
    spy = Stream(server.url, tokens["carol"], orchestrator="bob")
    assert spy.status == 403 and spy.ended.wait(10)
    assert Stream(server.url, tokens["carol"], orchestrator="bob", pending="messages").status == 403
    assert Stream(server.url, "not-a-token").status == 401
    # the master bearer names no single identity: no stream without saying whose (405, so that clients
    # which open the GET stream after initialize carry on over POST)
    assert Stream(server.url, MASTER).status == 405
    own = Stream(server.url, MASTER, orchestrator="bob")
    try:
        assert own.status == 200 and own.primed()
    finally:
        own.close()


def test_last_event_id_resumes_on_what_changed_meanwhile(world):
    server, tokens = world
    first = Stream(server.url, tokens["bob"])
    seen = first.primed()
    first.close()
    for n in range(3):  # while bob's stream is down
        call(server.url, tokens["alice"], "send_message", channel="bob", content=f"missed {n}", **{"from": "alice"})
    again = Stream(server.url, tokens["bob"], last_event_id=seen)
    try:
        again.wait_for(lambda: INBOX in again.uris())
        assert TASKS not in again.uris()  # the task queue did not change: not announced
        inbox = read_resource(server.url, tokens["bob"], INBOX)
        assert [m["content"] for m in inbox["unread"]] == ["missed 0", "missed 1", "missed 2"]
        latest = again.last_id
    finally:
        again.close()
    # resuming from the newest id: nothing to announce, only the priming event
    quiet = Stream(server.url, tokens["bob"], last_event_id=latest)
    try:
        assert quiet.primed() == latest
        call(server.url, tokens["alice"], "send_message", channel="carol", content="not bob's", **{"from": "alice"})
        time.sleep(1)
        assert quiet.uris() == []
        # an id it cannot read counts as "told nothing": both resources are announced
        garbage = Stream(server.url, tokens["bob"], last_event_id="v0.garbage")
        garbage.wait_for(lambda: {INBOX, TASKS} <= set(garbage.uris()))
        garbage.close()
    finally:
        quiet.close()


def test_subscriptions_listen_over_http_never_carries_another_identitys_updates(world):
    """2026-07-28: `subscriptions/listen` is a POST whose response is the stream. bob asks for
    alice's inbox too: it must not be acknowledged, nor delivered when alice's own listener is told."""
    server, tokens = world
    alice = Stream(server.url, tokens["alice"], listen=["vp://inbox/alice"])
    bob = Stream(server.url, tokens["bob"], listen=[INBOX, "vp://inbox/alice"])
    try:
        acks = {}
        for who, stream in (("alice", alice), ("bob", bob)):
            ack = stream.wait_for(lambda s=stream: next((m for _, _, m in s.events if m and "acknowledged" in
                                                         m["method"]), None))
            acks[who] = ack["params"]["notifications"]["resourceSubscriptions"]
        assert acks == {"alice": ["vp://inbox/alice"], "bob": [INBOX]}
        call(server.url, tokens["bob"], "send_message", channel="alice", content="to alice", **{"from": "bob"})
        alice.wait_for(lambda: "vp://inbox/alice" in alice.uris())
        call(server.url, tokens["alice"], "send_message", channel="bob", content="to bob", **{"from": "alice"})
        bob.wait_for(lambda: INBOX in bob.uris())
        assert bob.uris() == [INBOX], bob.events
    finally:
        alice.close()
        bob.close()


def _wait(server, token: str, tmp_path, *extra: str, timeout: float = 90) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("VP_ORCHESTRATOR", "VP_DB_PATH", "VP_DATABASE_URL")}
    env |= {"VP_BEARER_TOKEN": token, "VP_STATE_DIR": str(tmp_path / "state")}
    return subprocess.Popen([script(), "wait", "--url", server.base, "--timeout", str(timeout), *extra], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow  # a few CLI processes
def test_wait_url_wakes_on_a_message_and_keeps_wait_semantics(world, tmp_path):
    server, tokens = world
    waiter = _wait(server, tokens["bob"], tmp_path, "--for", "messages,tasks,work")
    deadline = time.monotonic() + 60
    line = ""
    while "armed" not in line and time.monotonic() < deadline:
        line = waiter.stderr.readline()
    assert "armed (orchestrator bob, messages,tasks,work)" in line, line
    sent = call(server.url, tokens["alice"], "send_message", channel="bob", content="deploy moved to 14:00",
                **{"from": "alice"})
    out, err = waiter.communicate(timeout=60)
    assert waiter.returncode == 0, err
    assert "1 new message(s)" in out and sent["messageId"] in out and "deploy moved" in out
    # the default state file (one per server URL and identity): not reported twice
    again = _wait(server, tokens["bob"], tmp_path, timeout=0)
    assert again.wait(60) == 3, again.communicate()
    # --json, and claimable work: an open task is new work for bob
    call(server.url, tokens["alice"], "create_task", title="anyone can take this", priority="low", createdBy="alice")
    work = _wait(server, tokens["bob"], tmp_path, "--for", "work", "--json", timeout=30)
    out, err = work.communicate(timeout=60)
    assert work.returncode == 0, err
    assert '"orchestrator": "bob"' in out and "anyone can take this" in out
    # a bad token or an unreachable server: exit 2, one line
    bad = _wait(server, "wrong", tmp_path, timeout=5)
    out, err = bad.communicate(timeout=60)
    assert bad.returncode == 2 and "HTTP 401" in err and "Traceback" not in err
