"""Two `serve` processes and a stdio process on one file — or one PostgreSQL, standing for several
hosts (issue #25): messages and task claims exactly once; SIGTERM stops a busy server cleanly."""

from __future__ import annotations

import contextlib
import os
import random

import anyio
import apsw
import pytest
from mcp import Client, StdioServerParameters
from support.http_helpers import MASTER, Serve, mcp_session, script, serving, text

pytestmark = pytest.mark.slow  # several serve processes

TASKS = 12
MESSAGES = 6


@pytest.mark.backends
def test_two_serve_processes_and_stdio_share_one_file_exactly_once(tmp_path, database_url):
    db = tmp_path / "shared.db"
    pg = {"VP_DATABASE_URL": database_url} if database_url else {}
    with serving(db, env=pg) as a, serving(db, env=pg) as b:
        stdio = StdioServerParameters(command=script(), args=[], cwd=str(tmp_path),
                                      env={**os.environ, "VP_DB_PATH": str(db), "VP_SCHEDULER": "off", **pg})

        async def make_tasks(client):
            ids = []
            for i in range(TASKS):
                r = await client.call_tool("create_task", {"title": f"job {i}", "assignedTo": "pool",
                                                           "createdBy": "lead", "priority": "medium"})
                assert not r.is_error
                ids.append(r.structured_content["result"])
            return ids

        task_ids = anyio.run(mcp_session, a.url, MASTER, make_tasks)

        async def worker(client, who: str, claims: list, order: list[str]):
            limit = anyio.CapacityLimiter(4)  # overlapping calls, without drowning a 2-core machine

            async def claim(task_id):
                async with limit:
                    r = await client.call_tool("checkout_task", {"taskId": task_id, "callerOrchestrator": who})
                assert not r.is_error
                claims.append((task_id, who, r.structured_content["claimed"]))

            async def send(i):
                async with limit:
                    r = await client.call_tool("send_message", {"channel": "bob", "content": f"{who}-{i}",
                                                                "from": who})
                assert not r.is_error

            await client.list_tools()  # the client caches the tool schemas once
            async with anyio.create_task_group() as tg:
                for task_id in order:
                    tg.start_soon(claim, task_id)
                for i in range(MESSAGES):
                    tg.start_soon(send, i)

        async def main():
            claims: list = []
            rng = random.Random(7)

            async def over_http(url, who):
                order = task_ids[:]
                rng.shuffle(order)
                await mcp_session(url, MASTER, lambda c: worker(c, who, claims, order))

            async def over_stdio():
                order = task_ids[:]
                rng.shuffle(order)
                async with Client(stdio) as c:
                    await worker(c, "s", claims, order)

            async with anyio.create_task_group() as tg:
                tg.start_soon(over_http, a.url, "a")
                tg.start_soon(over_http, b.url, "b")
                tg.start_soon(over_stdio)
            return claims

        claims = anyio.run(main)
        assert len(claims) == 3 * TASKS
        winners = {}
        for task_id, who, claimed in claims:
            if claimed:
                assert task_id not in winners, f"{task_id} claimed twice"
                winners[task_id] = who
        assert set(winners) == set(task_ids)

        async def check(client):
            owners = {}
            for task_id in task_ids:
                r = await client.call_tool("get_task", {"taskId": task_id})
                owners[task_id] = r.structured_content["result"]["assignedTo"]
            inbox = await client.call_tool("check_messages", {"recipient": "bob", "limit": 200})
            return owners, inbox.structured_content["result"]

        owners, inbox = anyio.run(mcp_session, b.url, MASTER, check)
        assert owners == winners
        contents = sorted(m["content"] for m in inbox)
        assert contents == sorted(f"{w}-{i}" for w in "abs" for i in range(MESSAGES))


def test_sigterm_lets_in_flight_calls_finish_and_loses_nothing(tmp_path):
    db = tmp_path / "term.db"
    server = Serve(db)
    ok: list[tuple[str, bool]] = []  # (messageId, answered after the signal was sent)
    errors: list[str] = []
    signalled = anyio.Event()

    async def main():
        async def client_loop(n: int):
            async def loop(client):
                i = 0
                while True:
                    r = await client.call_tool("send_message", {"channel": "bob", "content": f"c{n}-{i}", "from": "a"})
                    if r.is_error:
                        errors.append(text(r))
                        return
                    ok.append((r.structured_content["messageId"], signalled.is_set()))
                    i += 1
                    if len(ok) >= 40 and not signalled.is_set():
                        server.terminate()
                        signalled.set()
                    if i > 200:
                        return

            with contextlib.suppress(Exception):  # once the listener closes, new calls fail: expected
                await mcp_session(server.url, MASTER, loop)

        async with anyio.create_task_group() as tg:
            for n in range(8):
                tg.start_soon(client_loop, n)

    anyio.run(main)
    code = server.stop()
    log = server.log.read_text()
    assert code == 0, log
    assert "vantage-peers serve: stopped" in log
    assert errors == [], "no call may come back as a tool error during shutdown"
    assert len(ok) >= 40
    assert any(after for _, after in ok), "calls in flight when SIGTERM arrived were answered"
    conn = apsw.Connection(str(db))
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    stored = {r[0] for r in conn.execute("SELECT id FROM messages")}
    conn.close()
    assert {m for m, _ in ok} <= stored
