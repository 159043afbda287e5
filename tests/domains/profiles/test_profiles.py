"""Profiles and presence through the MCP tools."""

from __future__ import annotations

import time

import pytest
from conftest import open_tools

from vantage_peers.server import create_app

pytestmark = pytest.mark.backends


def test_update_profile_partial_and_get(tools):
    tools.call("update_profile", orchestratorId="sigma", name="Sigma",
               static={"role": "backend", "workspace": "acme", "capabilities": ["py", "sql"]})
    tools.call("update_profile", orchestratorId="sigma", static={"role": "lead"})
    p = tools.call("get_profile", orchestratorId="sigma")
    assert p["name"] == "Sigma"
    assert p["static"] == {"role": "lead", "workspace": "acme", "capabilities": ["py", "sql"]}
    tools.call("update_profile", orchestratorId="sigma", instanceId="sigma-laptop",
               dynamic={"currentTask": "tsk_1", "sessionCount": 3})
    p = tools.call("get_profile", orchestratorId="sigma")
    assert p["name"] == "Sigma"  # untouched by the partial update
    assert p["dynamic"]["currentTask"] == "tsk_1" and p["dynamic"]["sessionCount"] == 3
    assert [i["instanceId"] for i in p["instances"]] == ["sigma-laptop"]


def test_get_profile_unknown_is_null(tools):
    assert tools.call("get_profile", orchestratorId="nobody") is None


def test_update_profile_rejects_bad_shapes(tools):
    assert "static" in tools.error("update_profile", orchestratorId="a", static={"role": 5})
    assert "unknown argument 'static.bogus'" in tools.error("update_profile", orchestratorId="a", static={"bogus": 1})
    assert "sessionCount" in tools.error("update_profile", orchestratorId="a", dynamic={"sessionCount": -1})
    assert "INVALID_ARGUMENT" in tools.error("update_profile", orchestratorId="   ")
    assert "INVALID_ARGUMENT" in tools.error("update_profile", orchestratorId="x" * 500)


def test_set_summary_registers_presence_and_list_peers_orders(tools):
    for i in range(25):
        r = tools.call("set_summary", orchestratorId=f"orch{i}", instanceId=f"orch{i}-box", summary=f"work {i}")
        assert r["ok"] and f"orch{i}" in r["message"]
    time.sleep(0.005)  # lastSeen has millisecond resolution
    tools.call("set_summary", orchestratorId="orch3", instanceId="orch3-box", summary="newest")
    page = tools.call("list_peers")
    assert len(page["items"]) == 20 and "nextCursor" in page
    assert page["items"][0]["id"] == "orch3" and page["items"][0]["summary"] == "newest"
    seen, cursor = [], None
    while True:
        page = tools.call("list_peers", limit=7, **({"cursor": cursor} if cursor else {}))
        seen += [(i["orchestratorId"], i["instanceId"]) for i in page["items"]]
        cursor = page.get("nextCursor")
        if not cursor:
            break
    assert len(seen) == 25 and len(set(seen)) == 25
    lastseen = [i["lastSeen"] for i in tools.call("list_peers", limit=200)["items"]]
    assert lastseen == sorted(lastseen, reverse=True)
    lite = tools.call("list_peers", fields="lite", limit=1)["items"][0]
    assert set(lite) <= {"_id", "_creationTime", "id", "orchestratorId", "instanceId", "summary", "lastSeen"}
    assert tools.call("get_profile", orchestratorId="orch3")["summary"] == "newest"


def test_identity_defaults_and_presence_refresh(settings):
    app = create_app(settings.model_copy(update={"orchestrator": "tau", "instance_id": "tau-laptop",
                                                 "presence_interval_seconds": 0}))
    try:
        with open_tools(app) as tools:
            me = tools.call("whoami")
            assert me["configured"] and me["orchestratorId"] == "tau" and me["instanceId"] == "tau-laptop"
            # Any call registered presence for this instance.
            peers = tools.call("list_peers")["items"]
            assert [(p["id"], p["instanceId"]) for p in peers] == [("tau", "tau-laptop")]
            first = peers[0]["lastSeen"]
            tools.call("send_message", channel="bob", content="hello")  # `from` defaults to tau
            msg = tools.call("list_messages", detail="full")["items"][0]
            assert msg["from"] == "tau" and msg["fromInstanceId"] == "tau-laptop"
            assert tools.call("list_peers")["items"][0]["lastSeen"] >= first
            assert tools.call("set_summary", summary="on it")["instanceId"] == "tau-laptop"
            assert tools.call("get_profile")["orchestratorId"] == "tau"
    finally:
        app.db.close()


def test_whoami_without_identity(tools):
    assert tools.call("whoami")["configured"] is False
    assert "VP_ORCHESTRATOR" in tools.error("set_summary", summary="x")
