"""Leases over real HTTP (`vantage-peers serve` on 127.0.0.1): a scoped agent cannot act as another
holder, cannot force-release, cannot claim to be `system`; the master bearer can force-release."""

from __future__ import annotations

import pytest
from support.http_helpers import MASTER, scoped_token, serving, text

CEDAR = {"profileId": "cedar-agent", "description": "cedar", "fromAllowList": ["cedar"],
         "namespaceReadPrefixes": ["project/cedar"], "namespaceWritePrefixes": ["project/cedar"]}


@pytest.mark.slow
def test_path_reservations_over_http_from_the_attackers_side(tmp_path):
    with serving(tmp_path / "vp.db", env={"VP_EMBEDDINGS": "none"}) as server:
        cedar = scoped_token(server, CEDAR, name="cedar")

        async def as_bob(client):
            r = await client.call_tool("reserve_paths", {"paths": ["src/**"], "repo": "o/r", "reason": "refactor",
                                                         "callerOrchestrator": "bob"})
            assert not r.is_error, text(r)
            return r.structured_content["granted"][0]["id"]

        gid = server.mcp(MASTER, as_bob)

        async def attack(client):
            out = {}
            r = await client.call_tool("reserve_paths", {"paths": ["src/a.py"], "repo": "o/r"})  # as cedar
            out["conflict"] = text(r) if r.is_error else r.structured_content
            r = await client.call_tool("release_paths", {"ids": [gid], "callerOrchestrator": "bob"})
            out["release as bob"] = text(r)
            r = await client.call_tool("release_paths", {"ids": [gid]})
            out["release own name"] = r.structured_content["count"] if not r.is_error else text(r)
            r = await client.call_tool("force_release_path_reservation", {"id": gid, "reason": "mine"})
            out["force"] = text(r)
            r = await client.call_tool("force_release_path_reservation", {"id": gid, "reason": "mine",
                                                                          "callerOrchestrator": "system"})
            out["force as system"] = text(r)
            return out

        seen = server.mcp(cedar, attack)
        assert "PATH_CONFLICT" in seen["conflict"] and "bob" in seen["conflict"]
        assert "FORBIDDEN" in seen["release as bob"]
        assert seen["release own name"] == 0
        assert "RBAC_DENIED" in seen["force"]
        assert "FORBIDDEN" in seen["force as system"]

        async def as_master(client):
            r = await client.call_tool("force_release_path_reservation", {"id": gid, "reason": "ops decision",
                                                                          "callerOrchestrator": "ops"})
            assert not r.is_error, text(r)
            return r.structured_content

        assert server.mcp(MASTER, as_master)["released"] is True
