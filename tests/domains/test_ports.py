"""Ports (domains/ports.py): a function a higher domain offers to the ones below it."""

from __future__ import annotations

import pytest

from vantage_peers.domains import ports
from vantage_peers.domains.messaging import store as messaging
from vantage_peers.domains.tasks import store as tasks

pytestmark = pytest.mark.backends


def test_a_port_nobody_offers_raises_and_an_offered_one_calls_its_owner():
    @ports.port("tests.owner")
    def greet(name: str, *, punctuation: str = "!") -> str:
        """Greet `name`."""

    assert greet.__name__ == "greet" and greet.__doc__ == "Greet `name`."
    with pytest.raises(RuntimeError, match=r"port greet: nothing offers it; tests.owner offers it"):
        greet("bob")
    offered = greet.offer(lambda name, *, punctuation="!": f"hello {name}{punctuation}")
    assert greet("bob", punctuation="?") == "hello bob?" == offered("bob", punctuation="?")


def test_messaging_offers_notify_and_it_lands_in_the_inbox(db):
    assert ports.notify.implementation is messaging.send_message
    db.write(lambda c: ports.notify(c, sender="system", channel="bob", instance_id="b1", content="[auto] hello",
                                    data={"event": "probe"}))
    [msg] = db.read(lambda c: messaging.check_messages(c, recipient="bob", recipient_instance_id="b1"))
    assert (msg["from"], msg["content"], msg["data"]) == ("system", "[auto] hello", {"event": "probe"})
    assert db.read(lambda c: messaging.check_messages(c, recipient="carol")) == []


def test_tasks_offer_the_task_document_missions_list(db):
    assert ports.task_doc.implementation is tasks.task_doc
    tid = db.write(lambda c: tasks.create_task(c, payload={"title": "t", "priority": "low", "createdBy": "alice",
                                                           "pool": "backend"}))
    row = db.read(lambda c: c.one("SELECT * FROM tasks WHERE id = ?", (tid,)))
    assert ports.task_doc(row) == tasks.task_doc(row) and ports.task_doc(row)["_id"] == tid
