"""vp://inbox/{orchestrator} and vp://tasks/{orchestrator}: read, and subscriptions that deliver
`notifications/resources/updated` (legacy) or a listen event (2026-07-28) after ANOTHER process
writes, through the SDK client against the real stdio server."""

from __future__ import annotations

import json
import os
import warnings

import anyio
import mcp_types as types
import pytest
from conftest import make_settings
from mcp import Client, StdioServerParameters
from support.paths import console_script as _script

from vantage_peers.db import open_database
from vantage_peers.domains.messaging import store as messages

pytestmark = pytest.mark.slow  # stdio server processes


def params(tmp_path):
    env = {**os.environ, "VP_DB_PATH": str(tmp_path / "r.db"), "VP_ORCHESTRATOR": "bob", "VP_SCHEDULER": "off",
           "VP_EMBEDDINGS": "none"}
    return StdioServerParameters(command=_script(), args=[], env=env, cwd=str(tmp_path))


def writer(tmp_path):
    return open_database(make_settings(tmp_path / "r.db"))


def send(db, to, text):
    return db.write(lambda c: messages.send_message(c, sender="alice", channel=to, content=text))["messageId"]


def test_inbox_resource_reads_and_legacy_subscription_notifies(tmp_path):
    db = writer(tmp_path)
    updated: list[str] = []
    got = anyio.Event

    async def main():
        arrived = got()

        async def on_message(message):
            if isinstance(message, types.ServerNotification) and message.method == "notifications/resources/updated":
                updated.append(str(message.params.uri))
                arrived.set()

        async with Client(params(tmp_path), mode="legacy", message_handler=on_message) as client:
            templates = {str(t.uri_template) for t in (await client.list_resource_templates()).resource_templates}
            assert {"vp://inbox/{orchestrator}", "vp://tasks/{orchestrator}"} <= templates
            assert client.server_capabilities.resources.subscribe is True
            first = send(db, "bob", "before subscribing")
            doc = json.loads((await client.read_resource("vp://inbox/bob")).contents[0].text)
            assert doc["count"] == 1 and doc["unread"][0]["messageId"] == first
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.subscribe_resource("vp://inbox/bob")
                await client.subscribe_resource("vp://tasks/bob")
            send(db, "carol", "someone else's mail")  # a commit that changes nothing bob subscribed to
            await anyio.sleep(1.0)
            assert updated == []
            mid = send(db, "bob", "after subscribing")  # this process is not the server's
            with anyio.fail_after(30):
                await arrived.wait()
            assert updated == ["vp://inbox/bob"]
            doc = json.loads((await client.read_resource("vp://inbox/bob")).contents[0].text)
            assert [u["messageId"] for u in doc["unread"]] == [first, mid]
            # The task queue of bob changes: its own notification.
            db.write(lambda c: c.execute(
                "INSERT INTO tasks (id, title, assignedTo, priority, status, createdBy, createdAt, updatedAt) "
                "VALUES ('task_r', 'Review', 'bob', 'high', 'todo', 'alice', 1, 1)"))
            with anyio.fail_after(30):
                while "vp://tasks/bob" not in updated:
                    await anyio.sleep(0.05)
            tasks = json.loads((await client.read_resource("vp://tasks/bob")).contents[0].text)
            assert tasks["tasks"][0]["id"] == "task_r"
            # Unsubscribed (a later request: the SDK gives it another ServerSession): no more updates.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.unsubscribe_resource("vp://inbox/bob")
            heard = len(updated)
            send(db, "bob", "after unsubscribing")
            await anyio.sleep(1.5)
            assert "vp://inbox/bob" not in updated[heard:]

    anyio.run(main)
    db.close()


def test_listen_subscription_delivers_resource_updated(tmp_path):
    db = writer(tmp_path)

    async def main():
        async with Client(params(tmp_path), mode="2026-07-28") as client:
            async with client.listen(resource_subscriptions=["vp://inbox/bob"]) as sub:
                send(db, "carol", "not bob")
                mid = send(db, "bob", "wake up")
                with anyio.fail_after(30):
                    event = await sub.__anext__()
                assert getattr(event, "uri", None) == "vp://inbox/bob"
            doc = json.loads((await client.read_resource("vp://inbox/bob")).contents[0].text)
            assert doc["unread"][0]["messageId"] == mid

    anyio.run(main)
    db.close()
