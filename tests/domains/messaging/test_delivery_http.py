"""Acknowledgements over HTTP from the attacker's side: a scoped token cannot acknowledge as
another agent, nor read the delivery of another sender's message by naming that sender."""

from __future__ import annotations

import pytest
from support.http_helpers import MASTER, scoped_token, serving, text

CEDAR = {"profileId": "cedar-agent", "description": "cedar only", "fromAllowList": ["cedar"],
         "namespaceReadPrefixes": ["project/cedar"], "namespaceWritePrefixes": ["project/cedar"]}


@pytest.mark.slow
def test_scoped_token_cannot_acknowledge_or_inspect_for_others(tmp_path):
    with serving(tmp_path / "vp.db", env={"VP_EMBEDDINGS": "none"}) as server:
        cedar = scoped_token(server, CEDAR, name="cedar")

        async def seed(client):
            out = {}
            for to in ("pi", "cedar"):
                r = await client.call_tool("send_message", {"from": "alice", "channel": to, "content": f"for {to}",
                                                            "ackRequired": True})
                assert not r.is_error, text(r)
                out[to] = r.structured_content["messageId"]
            return out

        ids = server.mcp(MASTER, seed)

        async def attack(client):
            # Acknowledging pi's message by naming pi: refused by the scope (pi is not in fromAllowList).
            r = await client.call_tool("acknowledge_message", {"messageId": ids["pi"], "recipient": "pi"})
            assert r.is_error and "FORBIDDEN" in text(r), text(r)
            # Without a name, the token's one identity (cedar) is used: pi's receipt is not cedar's.
            r = await client.call_tool("acknowledge_message", {"messageId": ids["pi"]})
            assert r.is_error and "RBAC_DENIED" in text(r), text(r)
            # Naming the sender to read its delivery view: refused.
            r = await client.call_tool("get_message_delivery", {"messageId": ids["pi"], "callerOrchestrator": "alice"})
            assert r.is_error and "FORBIDDEN" in text(r), text(r)
            r = await client.call_tool("get_message_delivery", {"messageId": ids["pi"]})
            assert r.is_error and "RBAC_DENIED" in text(r), text(r)
            # Its own receipt: fine.
            r = await client.call_tool("acknowledge_message", {"messageId": ids["cedar"], "note": "seen"})
            assert not r.is_error and r.structured_content["acknowledged"] == 1, text(r)

        server.mcp(cedar, attack)

        async def check(client):
            r = await client.call_tool("get_message_delivery", {"messageId": ids["pi"], "callerOrchestrator": "alice"})
            assert r.structured_content["counts"]["acknowledged"] == 0
            r = await client.call_tool("get_message_delivery", {"messageId": ids["cedar"],
                                                                "callerOrchestrator": "alice"})
            assert r.structured_content["recipients"][0]["ackNote"] == "seen"

        server.mcp(MASTER, check)
