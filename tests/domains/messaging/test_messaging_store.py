"""Messaging store functions on a temp DB file (no MCP layer)."""

from __future__ import annotations

import pytest

from vantage_peers.domains.messaging import store
from vantage_peers.domains.profiles import store as profiles

pytestmark = pytest.mark.backends


@pytest.fixture
def db(db):
    """The shared migrated `db` (conftest), with three profiles."""
    database = db
    for who in ("alice", "bob", "dev-frontend"):
        database.write(lambda c, who=who: profiles.ensure_profile(c, who))
    database.write(lambda c: profiles.touch(c, orchestrator_id="bob", instance_id="bob-vps-01"))
    return database


def test_resolve_recipients(db):
    r = lambda channel, inst=None: db.read(  # noqa: E731
        lambda c: store.resolve_recipients(c, sender="alice", channel=channel, instance_id=inst))
    assert sorted(r("broadcast")) == [("bob", None), ("dev-frontend", None)]
    assert r("bob") == [("bob", None)]
    assert r("bob", "bob-laptop") == [("bob", "bob-laptop")]
    assert r("bob-vps-01") == [("bob", "bob-vps-01")]  # a known instance id
    assert r("dev-frontend") == [("dev-frontend", None)]  # a profile with a dash stays a role
    assert r("ghost-role") == [("ghost-role", None)]  # unknown: a role, so its backlog waits for it
    assert r(" bob ,alice,, bob") == [("bob", None), ("alice", None)]


def test_send_is_one_transaction_with_its_receipts(db):
    def failing(c):
        store.send_message(c, sender="alice", channel="broadcast", content="x")
        raise RuntimeError("crash after the insert")

    with pytest.raises(RuntimeError):
        db.write(failing)
    assert db.conn.scalar("SELECT count(*) FROM messages") == 0
    assert db.conn.scalar("SELECT count(*) FROM messageReceipts") == 0


def test_mark_as_read_many_ids_and_check_limit(db):
    for i in range(1200):
        db.write(lambda c, i=i: store.send_message(c, sender="alice", channel="bob", content=f"m{i}"))
    unread = db.read(lambda c: store.check_messages(c, recipient="bob", limit=1200))
    assert len(unread) == 1200 and unread[0]["content"] == "m0" and unread[-1]["content"] == "m1199"
    ids = [m["receiptId"] for m in unread[:1100]]
    assert db.write(lambda c: store.mark_as_read(c, receipt_ids=ids)) == 1100  # chunked under SQLite's limits
    rest = db.read(lambda c: store.check_messages(c, recipient="bob", limit=500))
    assert [m["content"] for m in rest] == [f"m{i}" for i in range(1100, 1200)]


@pytest.mark.sqlite_only
def test_check_messages_uses_the_unread_index(db):
    plan = db.conn.query(
        "EXPLAIN QUERY PLAN SELECT r.id FROM messageReceipts r INDEXED BY receipts_unread "
        "WHERE r.recipient = ? AND r.readAt IS NULL ORDER BY r.createdAt, r.id LIMIT 10", ("bob",))
    assert any("receipts_unread" in row["detail"] for row in plan)
