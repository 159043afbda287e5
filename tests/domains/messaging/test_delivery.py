"""Acknowledgements, delivery status, redelivery and dead letters (docs/delivery.md), through the MCP tools.

The scheduler runs with an injected clock (`Scheduler(app, clock=...)`, `run_once`): no sleeping.
"""

from __future__ import annotations

import time

import pytest

from vantage_peers.domains.messaging.tools_delivery import JOB
from vantage_peers.pipeline.scheduler import Scheduler

pytestmark = pytest.mark.backends


def send(tools, sender, channel, content="hi", **kw):
    return tools.call("send_message", **{"from": sender, "channel": channel, "content": content, **kw})


@pytest.fixture
def team(tools):
    for who in ("alice", "bob", "carol"):
        tools.call("update_profile", orchestratorId=who)
        tools.call("set_summary", orchestratorId=who, summary="here")  # presence: not stale
    return tools


def run_job(app, at_ms: int):
    return Scheduler(app, clock=lambda: at_ms).run_once({JOB})[JOB]


def test_ack_required_shows_in_check_and_acknowledge_is_by_recipient_only(team):
    sent = send(team, "alice", "bob,carol", "deploy?", ackRequired=True, ackTimeoutSeconds=60)
    got = team.call("check_messages", recipient="bob")
    assert len(got) == 1 and got[0]["ackRequired"] is True and got[0]["deliveryAttempt"] == 1
    rid = got[0]["receiptId"]
    # Attacker side: carol cannot acknowledge bob's receipt by id; by message id a recipient
    # acknowledges only their own receipt.
    assert "RBAC_DENIED" in team.error("acknowledge_message", receiptIds=[rid], recipient="carol")
    assert "RBAC_DENIED" in team.error("acknowledge_message", messageId=sent["messageId"], recipient="mallory")
    assert "NOT_FOUND" in team.error("acknowledge_message", receiptIds=["rcp_nope"], recipient="bob")
    assert "INVALID_ARGUMENT" in team.error("acknowledge_message", recipient="bob")
    assert "INVALID_ARGUMENT" in team.error("acknowledge_message", receiptIds=[rid], messageId=sent["messageId"],
                                            recipient="bob")
    first = team.call("acknowledge_message", receiptIds=[rid], note="on it", recipient="bob")
    assert first == {"acknowledged": 1, "alreadyAcknowledged": 0, "receiptIds": [rid]}
    again = team.call("acknowledge_message", receiptIds=[rid], note="changed", recipient="bob")
    assert again["acknowledged"] == 0 and again["alreadyAcknowledged"] == 1  # idempotent: first note kept
    view = team.call("get_message_delivery", messageId=sent["messageId"], callerOrchestrator="alice")
    by = {r["recipient"]: r for r in view["recipients"]}
    assert by["bob"]["acknowledged"] and by["bob"]["ackNote"] == "on it" and by["bob"]["read"]
    assert by["bob"]["acknowledgedBy"] == "bob" and by["bob"]["acknowledgedAt"] > 0
    assert not by["carol"]["acknowledged"] and not by["carol"]["read"] and by["carol"]["delivered"]
    assert view["counts"] == {"recipients": 2, "read": 1, "acknowledged": 1, "pending": 1, "deadLettered": 0,
                              "stale": 0}
    assert all(r["recipientLastSeen"] and r["stale"] is False for r in view["recipients"])
    # Only the sender or system see delivery.
    assert "RBAC_DENIED" in team.error("get_message_delivery", messageId=sent["messageId"], callerOrchestrator="bob")
    assert team.call("get_message_delivery", messageId=sent["messageId"], callerOrchestrator="system")
    assert "NOT_FOUND" in team.error("get_message_delivery", messageId="msg_nope", callerOrchestrator="alice")
    # Acknowledged by message id: carol's own receipt only.
    assert team.call("acknowledge_message", messageId=sent["messageId"], recipient="carol")["acknowledged"] == 1
    assert team.call("get_message_delivery", messageId=sent["messageId"],
                     callerOrchestrator="alice")["counts"]["pending"] == 0


def test_mark_as_read_is_not_an_acknowledgement_and_redelivery_brings_it_back(app, team):
    sent = send(team, "alice", "bob", "ack me", ackRequired=True, ackTimeoutSeconds=10)
    got = team.call("check_messages", recipient="bob")
    team.call("mark_as_read", receiptIds=[got[0]["receiptId"]])
    assert team.call("check_messages", recipient="bob") == []
    t0 = int(time.time() * 1000)
    assert run_job(app, t0 + 5_000) == {"redelivered": 0, "deadLettered": 0}  # not due yet
    assert run_job(app, t0 + 11_000) == {"redelivered": 1, "deadLettered": 0}
    back = team.call("check_messages", recipient="bob")
    assert [(m["messageId"], m["deliveryAttempt"], m["ackRequired"]) for m in back] == [(sent["messageId"], 2, True)]
    assert run_job(app, t0 + 11_000) == {"redelivered": 0, "deadLettered": 0}  # the same instant: once only
    view = team.call("get_message_delivery", messageId=sent["messageId"], callerOrchestrator="alice")
    assert view["recipients"][0]["redelivered"] == 1 and view["recipients"][0]["read"] is False


def test_backoff_then_dead_letter_notifies_sender_once(app, team):
    app.settings.max_delivery_attempts = 3
    sent = send(team, "alice", "bob", "urgent", ackRequired=True, ackTimeoutSeconds=10)
    t0 = int(time.time() * 1000)
    # Attempt 1 waits 10 s, attempt 2 waits 20 s, attempt 3 waits 40 s, then dead letter.
    assert run_job(app, t0 + 11_000)["redelivered"] == 1
    assert run_job(app, t0 + 11_000 + 15_000)["redelivered"] == 0  # backoff: 20 s now
    assert run_job(app, t0 + 11_000 + 21_000)["redelivered"] == 1
    at3 = t0 + 32_000
    assert run_job(app, at3 + 39_000) == {"redelivered": 0, "deadLettered": 0}
    assert run_job(app, at3 + 41_000) == {"redelivered": 0, "deadLettered": 1}
    assert run_job(app, at3 + 500_000) == {"redelivered": 0, "deadLettered": 0}
    notes = team.call("check_messages", recipient="alice")
    assert len(notes) == 1 and notes[0]["from"] == "system"
    assert sent["messageId"] in notes[0]["content"] and "bob" in notes[0]["content"]
    assert "last seen at" in notes[0]["content"]
    view = team.call("get_message_delivery", messageId=sent["messageId"], callerOrchestrator="alice")
    r = view["recipients"][0]
    assert r["deadLettered"] and r["redelivered"] == 2 and r["deliveryAttempt"] == 3 and not r["pending"]
    # A late acknowledgement is still recorded.
    assert team.call("acknowledge_message", messageId=sent["messageId"], recipient="bob")["acknowledged"] == 1


def test_acknowledged_receipt_is_never_redelivered(app, team):
    send(team, "alice", "bob", "x", ackRequired=True, ackTimeoutSeconds=5)
    rid = team.call("check_messages", recipient="bob")[0]["receiptId"]
    team.call("acknowledge_message", receiptIds=[rid], recipient="bob")
    t0 = int(time.time() * 1000)
    for k in range(1, 8):
        assert run_job(app, t0 + k * 3_600_000) == {"redelivered": 0, "deadLettered": 0}
    assert team.call("check_messages", recipient="bob") == []


def test_stale_recipient_does_not_hold_a_broadcast(app, team):
    team.call("update_profile", orchestratorId="ghost")  # a profile, never any presence
    app.db.write(lambda c: c.execute("INSERT INTO instances (id, orchestratorId, instanceId, lastSeen, createdAt) "
                                     "VALUES ('ins_old', 'zombie', '', 1, 1)"))
    team.call("update_profile", orchestratorId="zombie")
    raw = team.raw("send_message", **{"from": "alice", "channel": "broadcast", "content": "all hands",
                                      "ackRequired": True, "ackTimeoutSeconds": 10})
    sent = raw.structured_content
    assert sent["recipients"] == 4
    assert "2 stale recipient(s)" in " ".join(getattr(c, "text", "") for c in raw.content)
    for who in ("bob", "carol"):
        team.call("acknowledge_message", messageId=sent["messageId"], recipient=who)
    view = team.call("get_message_delivery", messageId=sent["messageId"], callerOrchestrator="alice")
    by = {r["recipient"]: r for r in view["recipients"]}
    assert by["ghost"]["stale"] and by["ghost"]["recipientLastSeen"] is None and by["ghost"]["skippedAsStale"]
    assert by["zombie"]["stale"] and by["zombie"]["recipientLastSeen"] == 1
    assert view["counts"]["pending"] == 0 and view["counts"]["stale"] == 2  # complete without the stale ones
    t0 = int(time.time() * 1000)
    for k in range(1, 10):  # never redelivered nor dead-lettered to the stale ones
        result = run_job(app, t0 + k * 86_400_000)
        assert result["deadLettered"] == 0
    assert [m for m in team.call("check_messages", recipient="alice") if m["from"] == "system"] == []
    # The stale agent still finds the message when it comes back, and may acknowledge it.
    assert any(m["messageId"] == sent["messageId"] for m in team.call("check_messages", recipient="ghost"))
    assert team.call("acknowledge_message", messageId=sent["messageId"], recipient="ghost")["acknowledged"] == 1


def test_ack_arguments_are_validated(team):
    for bad in (0, -5, 10**9):
        assert "INVALID_ARGUMENT" in team.error("send_message", **{"from": "alice", "channel": "bob", "content": "x",
                                                                   "ackRequired": True, "ackTimeoutSeconds": bad})
    assert "INVALID_ARGUMENT" in team.error("send_message", **{"from": "alice", "channel": "bob", "content": "x",
                                                               "ackTimeoutSeconds": 5})
    assert "INVALID_ARGUMENT" in team.error("acknowledge_message", messageId="m", note="x" * 20_000, recipient="bob")
    plain = send(team, "alice", "bob", "no ack")
    got = [m for m in team.call("check_messages", recipient="bob") if m["messageId"] == plain["messageId"]]
    assert "ackRequired" not in got[0] and "deliveryAttempt" not in got[0]


def test_system_may_acknowledge_any_receipt(team):
    sent = send(team, "alice", "bob,carol", "x", ackRequired=True)
    assert team.call("acknowledge_message", messageId=sent["messageId"], recipient="system")["acknowledged"] == 2


def test_status_marks_silent_peers_stale(app, team):
    from vantage_peers.status import collect, render

    app.db.write(lambda c: c.execute("INSERT INTO instances (id, orchestratorId, instanceId, lastSeen, createdAt) "
                                     "VALUES ('ins_z', 'zombie', 'z-1', 1, 1)"))
    data = collect(app)
    by = {(p["orchestratorId"], p["instanceId"]): p["stale"] for p in data["peers"]}
    assert by[("zombie", "z-1")] is True and by[("bob", "")] is False
    line = next(x for x in render(data).splitlines() if "zombie/z-1" in x)
    assert "STALE" in line


def test_hostile_input_to_delivery_tools(team, backend):
    sent = send(team, "alice", "bob", "x", ackRequired=True)
    # PostgreSQL's TEXT cannot hold U+0000: there it is refused by name (db/postgres.py), never a crash.
    refused = ("NOT_FOUND",) if backend == "sqlite" else ("NOT_FOUND", "NUL character")
    for bad in ("' OR 1=1 --", "msg_\x00", "%", "*", '"; DROP TABLE messages; --'):
        for err in (team.error("acknowledge_message", messageId=bad, recipient="bob"),
                    team.error("acknowledge_message", receiptIds=[bad], recipient="bob"),
                    team.error("get_message_delivery", messageId=bad, callerOrchestrator="alice")):
            assert any(code in err for code in refused), err
    assert "INVALID_ARGUMENT" in team.error("acknowledge_message", receiptIds=[f"r{i}" for i in range(501)],
                                            recipient="bob")
    assert "INVALID_ARGUMENT" in team.error("acknowledge_message", receiptIds=[], recipient="bob")
    assert "INVALID_ARGUMENT" in team.error("acknowledge_message", receiptIds="rcp_1", recipient="bob")
    assert "INVALID_ARGUMENT" in team.error("send_message", **{"from": "alice", "channel": "bob", "content": "x",
                                                               "ackRequired": "yes please"})
    # A mix of one's own receipt and a foreign one acknowledges nothing.
    mine = team.call("check_messages", recipient="bob")[0]["receiptId"]
    other = send(team, "alice", "carol", "y", ackRequired=True)
    theirs = team.call("check_messages", recipient="carol")[0]["receiptId"]
    assert "RBAC_DENIED" in team.error("acknowledge_message", receiptIds=[mine, theirs], recipient="bob")
    view = team.call("get_message_delivery", messageId=sent["messageId"], callerOrchestrator="alice")
    assert view["counts"]["acknowledged"] == 0
    assert team.call("get_message_delivery", messageId=other["messageId"],
                     callerOrchestrator="alice")["counts"]["acknowledged"] == 0


@pytest.mark.sqlite_only
def test_migration_012_columns_exist_on_a_fresh_file(app):
    cols = {r["name"] for r in app.db.read(lambda c: c.query("PRAGMA table_info(messageReceipts)"))}
    assert {"ackRequired", "ackTimeoutMs", "ackedAt", "ackNote", "ackedBy", "deliveryAttempt", "redeliveredAt",
            "nextDeliveryAt", "deadLetteredAt", "staleAtSend"} <= cols
