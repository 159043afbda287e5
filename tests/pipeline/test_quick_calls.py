"""Quick tools (`quick=True`: only local database work) run on the event loop on SQLite, without the
worker-thread hop; a locked file moves the call, from its start, to a worker thread, and the loop keeps
answering meanwhile. PostgreSQL calls always run on worker threads."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import apsw
import pytest
from conftest import make_settings
from mcp import Client

from vantage_peers.core.inline import WouldWait, off_loop
from vantage_peers.domains.messaging import store as messages
from vantage_peers.server import create_app

QUICK = {"send_message", "check_messages", "mark_as_read", "acknowledge_message", "get_message",
         "get_message_delivery", "get_task", "start_task", "checkout_task"}


def make_app(tmp_path, **overrides: Any):
    return create_app(make_settings(tmp_path / "quick.db", orchestrator="alice", busy_timeout_ms=120_000,
                                    **overrides))


def threads_of_sends(monkeypatch) -> list[int]:
    """The thread each send_message's store call ran on."""
    seen: list[int] = []
    real = messages.send_message

    def recorded(*args: Any, **kwargs: Any) -> Any:
        seen.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(messages, "send_message", recorded)
    return seen


def called(app: Any, *calls: tuple[str, dict[str, Any]]) -> int:
    """Make `calls` through a client on a fresh event loop, then close the app; the loop's thread."""
    async def run() -> int:
        async with Client(app.mcp) as client:
            for name, args in calls:
                got = await client.call_tool(name, args)
                assert not got.is_error, got.content
        return threading.get_ident()

    try:
        return anyio.run(run)
    finally:
        app.db.close()


def test_the_declared_quick_tools(tmp_path) -> None:
    app = make_app(tmp_path)
    try:
        assert {name for name, reg in app.registered.items() if reg.policy.quick} == QUICK
    finally:
        app.db.close()


def test_a_quick_tool_runs_on_the_event_loop_and_others_on_a_worker(tmp_path, monkeypatch) -> None:
    app = make_app(tmp_path)
    seen = threads_of_sends(monkeypatch)
    created: list[int] = []
    real_create = __import__("vantage_peers.domains.tasks.store", fromlist=["create_task"]).create_task

    def create(*args: Any, **kwargs: Any) -> Any:
        created.append(threading.get_ident())
        return real_create(*args, **kwargs)

    monkeypatch.setattr("vantage_peers.domains.tasks.store.create_task", create)

    loop = called(app, ("send_message", {"channel": "bob", "content": "hi"}),
                  ("create_task", {"title": "t", "priority": "low"}))
    assert seen == [loop]  # no hop
    assert created and created[0] != loop  # create_task is not quick: a worker thread


def test_a_locked_file_moves_the_call_to_a_worker_and_the_loop_keeps_answering(tmp_path, monkeypatch) -> None:
    app = make_app(tmp_path)
    seen = threads_of_sends(monkeypatch)
    said: list[str] = []

    def hook(tool: str, kwargs: dict[str, Any]) -> None:  # a warning made before the body's transaction
        if tool == "send_message":
            said.append(tool)
            app.warn(f"attempt {len(said)}")

    app.before_call(hook)
    blocker = apsw.Connection(str(app.db.path))
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock

    async def run() -> tuple[Any, Any, int]:
        done = anyio.Event()
        out: dict[str, Any] = {}
        async with Client(app.mcp) as client, anyio.create_task_group() as tg:
            async def send() -> None:
                out["sent"] = await client.call_tool("send_message", {"channel": "bob", "content": "while locked"})
                done.set()

            tg.start_soon(send)
            # The loop is free: reads (WAL) answer while the send waits for the lock on a worker thread.
            for _ in range(3):
                inbox = await client.call_tool("check_messages", {"recipient": "bob"})
                assert not inbox.is_error, inbox.content
            assert not done.is_set()  # it cannot have committed: the lock is still held
            blocker.execute("ROLLBACK")
            await done.wait()
            after = await client.call_tool("check_messages", {"recipient": "bob"})
        return out["sent"], after, threading.get_ident()

    try:
        sent, after, loop = anyio.run(run)
    finally:
        blocker.close()
        app.db.close()
    assert not sent.is_error, sent.content
    assert [w for w in sent.structured_content["warnings"] if w.startswith("attempt")] == ["attempt 2"]
    assert said == ["send_message", "send_message"]  # tried on the loop, then run again on a worker
    assert len(seen) == 1 and seen[0] != loop  # the body ran once, on a worker thread
    assert [m["content"] for m in after.structured_content["result"]] == ["while locked"]


def test_a_quick_call_does_not_wait_on_the_loop_for_another_calls_first_check(tmp_path, monkeypatch) -> None:
    """The inherited-lease check of an identity's first call holds a lock: a quick call on the loop
    that finds it taken moves to a worker thread instead of stopping the loop."""
    from vantage_peers.domains.profiles.liveness import state_of

    app = make_app(tmp_path)
    seen = threads_of_sends(monkeypatch)
    lock = state_of(app).lock
    lock.acquire()  # another call's check is running
    watchdog = threading.Timer(60, lock.release)  # without the fix the loop would wait here for good
    watchdog.start()

    async def run() -> tuple[Any, int]:
        done = anyio.Event()
        out: dict[str, Any] = {}
        async with Client(app.mcp) as client, anyio.create_task_group() as tg:
            async def send() -> None:
                out["sent"] = await client.call_tool("send_message", {"channel": "bob", "content": "hi"})
                done.set()

            tg.start_soon(send)
            for _ in range(3):
                await client.list_tools()  # the loop answers while the send waits for the lock
            assert not done.is_set()
            watchdog.cancel()
            lock.release()
            await done.wait()
        return out["sent"], threading.get_ident()

    try:
        sent, loop = anyio.run(run)
    finally:
        watchdog.cancel()
        app.db.close()
    assert not sent.is_error, sent.content
    assert len(seen) == 1 and seen[0] != loop


def test_a_write_that_committed_waits_instead_of_starting_over(tmp_path) -> None:
    """Inline, once a write of the call committed, a lock waits as usual: the call never runs twice."""
    app = make_app(tmp_path)
    try:
        with app.db.inline(), app.db.call_scope():
            app.db.write(lambda c: c.execute("CREATE TABLE t (x)"))
            off_loop()  # committed: stays where it is
            app.db.write(lambda c: c.execute("INSERT INTO t VALUES (1)"))
        with app.db.inline(), app.db.call_scope(), pytest.raises(WouldWait):
            off_loop()  # nothing committed yet: moves
        off_loop()  # not inline: nothing happens
        assert app.db.read(lambda c: c.scalar("SELECT count(*) FROM t")) == 1
    finally:
        app.db.close()


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_postgres_calls_run_on_worker_threads(tmp_path, monkeypatch, backend, database_url) -> None:
    app = create_app(make_settings(tmp_path / "unused.db", orchestrator="alice", database_url=database_url))
    seen = threads_of_sends(monkeypatch)

    loop = called(app, ("send_message", {"channel": "bob", "content": "hi"}))
    assert app.db.runs_inline is False
    assert len(seen) == 1 and seen[0] != loop


@pytest.mark.slow
def test_quick_calls_race_across_processes(tmp_path) -> None:
    """Three processes, each one event loop with four calls in flight: every checkout_task through the
    pipeline (on the loop, or moved to a worker when another process holds the lock) has exactly one
    winner per task, and every send_message is stored once."""
    import multiprocessing as mp
    from collections import Counter

    from support.quick_race_worker import CONCURRENT, race

    from vantage_peers.domains.tasks import store as tasks

    processes, rounds = 3, 10
    app = make_app(tmp_path)
    payload = {"title": "contended", "assignedTo": "pool", "priority": "high", "createdBy": "pi"}
    ids = app.db.write(lambda c: [tasks.create_task(c, payload=payload) for _ in range(rounds)])
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=race, args=(str(app.db.path), p, ids, barrier, results)) for p in range(processes)]
    try:
        for p in procs:
            p.start()
        outcomes = [o for _ in procs for o in results.get(timeout=300)]
        for p in procs:
            p.join(timeout=60)
            assert p.exitcode == 0
        claims = [o for o in outcomes if o[0] != "send"]
        sends = [o for o in outcomes if o[0] == "send"]
        assert len(claims) == len(sends) == processes * rounds * CONCURRENT
        assert None not in {claimed for _, _, claimed in claims} | {mid for _, _, mid in sends}  # no call failed
        assert Counter(t for t, _, claimed in claims if claimed) == Counter({t: 1 for t in ids})
        stored = app.db.read(lambda c: c.rows("SELECT id FROM messages WHERE channel = 'sink'"))
        assert sorted(r[0] for r in stored) == sorted(mid for _, _, mid in sends)  # each once
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        app.db.close()
