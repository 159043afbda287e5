"""Delivery across OS processes: two stdio servers (sender and recipient), and the redelivery /
dead-letter job run by several processes at once on one file or one PostgreSQL database (each effect
exactly once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
import pytest
from conftest import make_settings
from mcp import Client, StdioServerParameters
from support.paths import console_script as _script

from vantage_peers.db import open_database
from vantage_peers.domains.messaging import delivery
from vantage_peers.domains.messaging import store as messages

pytestmark = pytest.mark.slow  # several stdio processes

WORKER = """
import json, sys
from vantage_peers.db import open_target
from vantage_peers.domains.messaging.delivery import redeliver_due
db = open_target(sys.argv[1])
now, attempts, rounds = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
total = {"redelivered": 0, "deadLettered": 0}
for _ in range(rounds):
    got = db.write(lambda c: redeliver_due(c, now=now, max_attempts=attempts))
    for k in total:
        total[k] += got[k]
print(json.dumps(total))
"""


def server(tmp_path, who, **env):
    full = {**os.environ, "VP_DB_PATH": str(tmp_path / "d.db"), "VP_ORCHESTRATOR": who, "VP_EMBEDDINGS": "none",
            "VP_PRESENCE_INTERVAL_SECONDS": "0", **env}
    return StdioServerParameters(command=_script(), args=[], env=full, cwd=str(tmp_path))


def data(result):
    assert not result.is_error, result.content
    sc = result.structured_content
    return sc["result"] if isinstance(sc, dict) and set(sc) == {"result"} else sc


def test_ack_and_delivery_status_across_two_stdio_processes(tmp_path):
    async def main():
        # bob's server runs the scheduler with a short tick: redelivery happens in a server process.
        async with Client(server(tmp_path, "alice", VP_SCHEDULER="off")) as alice, \
                Client(server(tmp_path, "bob", VP_TICK_SECONDS="0.3")) as bob:
            await bob.call_tool("set_summary", {"summary": "online"})
            sent = data(await alice.call_tool("send_message", {"channel": "bob", "content": "ship it?",
                                                               "ackRequired": True, "ackTimeoutSeconds": 1}))
            first = data(await bob.call_tool("check_messages", {}))
            assert first[0]["deliveryAttempt"] == 1 and first[0]["ackRequired"] is True
            await bob.call_tool("mark_as_read", {"receiptIds": [first[0]["receiptId"]]})
            again: list = []
            with anyio.fail_after(60):  # redelivered by bob's scheduler once the second has passed
                while not again:
                    await anyio.sleep(0.2)
                    again = data(await bob.call_tool("check_messages", {}))
            assert again[0]["messageId"] == sent["messageId"] and again[0]["deliveryAttempt"] >= 2
            view = data(await alice.call_tool("get_message_delivery", {"messageId": sent["messageId"]}))
            assert view["recipients"][0]["redelivered"] >= 1 and not view["recipients"][0]["acknowledged"]
            # bob cannot see alice's delivery view; alice cannot acknowledge bob's receipt.
            denied = await bob.call_tool("get_message_delivery", {"messageId": sent["messageId"]})
            assert denied.is_error and "RBAC_DENIED" in denied.content[0].text
            denied = await alice.call_tool("acknowledge_message", {"receiptIds": [again[0]["receiptId"]]})
            assert denied.is_error and "RBAC_DENIED" in denied.content[0].text
            ack = data(await bob.call_tool("acknowledge_message", {"messageId": sent["messageId"], "note": "done"}))
            assert ack["acknowledged"] == 1
            view = data(await alice.call_tool("get_message_delivery", {"messageId": sent["messageId"]}))
            r = view["recipients"][0]
            assert r["acknowledged"] and r["ackNote"] == "done" and r["read"] and r["recipientLastSeen"]
            assert view["counts"]["pending"] == 0
            await anyio.sleep(1.5)  # several more ticks: an acknowledged receipt is never redelivered
            assert data(await bob.call_tool("check_messages", {})) == []

    anyio.run(main)


@pytest.mark.backends
def test_redelivery_and_dead_letters_exactly_once_across_processes(db_path, database_url, db_target):
    path = db_path
    db = open_database(make_settings(path, database_url=database_url))
    ids = []
    for i in range(60):
        def send(c, i=i):
            sent = messages.send_message(c, sender="alice", channel=f"agent{i % 6}", content=f"m{i}")
            delivery.require_ack(c, message_id=sent["messageId"], timeout_ms=1000, now=0, dead_after_ms=1,
                                 broadcast=False)
            return sent["messageId"]
        ids.append(db.write(send))

    def race(now, attempts):
        procs = [subprocess.Popen([sys.executable, "-c", WORKER, db_target, str(now), str(attempts), "5"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
        outs = [p.communicate(timeout=120) for p in procs]
        assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
        totals = [json.loads(o[0]) for o in outs]
        return {k: sum(t[k] for t in totals) for k in ("redelivered", "deadLettered")}

    assert race(5_000, 3) == {"redelivered": 60, "deadLettered": 0}  # due once: redelivered once
    attempts = db.read(lambda c: c.query("SELECT deliveryAttempt, count(*) AS n FROM messageReceipts "
                                         "WHERE messageId IN (SELECT id FROM messages WHERE sender = 'alice') "
                                         "GROUP BY deliveryAttempt"))
    assert attempts == [{"deliveryAttempt": 2, "n": 60}]
    assert race(10**12, 2) == {"redelivered": 0, "deadLettered": 60}
    notices = db.read(lambda c: c.query("SELECT content FROM messages WHERE sender = 'system'"))
    assert len(notices) == 60
    assert sorted(next(m for m in ids if m in n["content"]) for n in notices) == sorted(ids)
    assert race(10**13, 2) == {"redelivered": 0, "deadLettered": 0}
    db.close()

