"""Messaging through the MCP tools: routing, receipts, RBAC, listing, search."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.backends


def send(tools, sender, channel, content="hi", **kw):
    return tools.call("send_message", **{"from": sender, "channel": channel, "content": content, **kw})


@pytest.fixture
def team(tools):
    for who in ("alice", "bob", "carol", "dave"):
        tools.call("update_profile", orchestratorId=who)
    tools.call("set_summary", orchestratorId="bob", instanceId="bob-laptop", summary="x")
    tools.call("set_summary", orchestratorId="bob", instanceId="bob-server", summary="y")
    return tools


def test_direct_message_one_receipt_all_instances_see_it(team):
    r = send(team, "alice", "bob", "ping")
    assert r["messageId"].startswith("msg_") and r["recipients"] == 1
    for inst in ("bob-laptop", "bob-server", None):
        args = {"recipient": "bob", **({"recipientInstanceId": inst} if inst else {})}
        got = team.call("check_messages", **args)
        assert [m["content"] for m in got] == ["ping"]
    assert team.call("check_messages", recipient="carol") == []


def test_broadcast_resolves_to_every_profile_but_sender(team):
    r = send(team, "alice", "broadcast", "all hands")
    assert r["recipients"] == 3
    status = team.call("list_broadcast_status", messageId=r["messageId"])
    assert sorted(x["recipient"] for x in status["receipts"]) == ["bob", "carol", "dave"]
    assert all(x["read"] is False for x in status["receipts"])
    assert team.call("check_messages", recipient="alice") == []
    team.call("update_profile", orchestratorId="erin")  # a new profile joins broadcast at once
    assert send(team, "alice", "broadcast")["recipients"] == 4


def test_multi_target_and_instance_targeting(team):
    assert send(team, "alice", "bob, carol ,bob")["recipients"] == 2
    send(team, "alice", "bob", "laptop only", instanceId="bob-laptop")
    send(team, "carol", "bob-server", "server via channel")  # a known instance id as channel
    laptop = [m["content"] for m in team.call("check_messages", recipient="bob", recipientInstanceId="bob-laptop")]
    server = [m["content"] for m in team.call("check_messages", recipient="bob", recipientInstanceId="bob-server")]
    assert "laptop only" in laptop and "laptop only" not in server
    assert "server via channel" in server and "server via channel" not in laptop
    # A role with a dash that is not a known instance stays a role.
    send(team, "alice", "dev-frontend", "to the role")
    assert [m["content"] for m in team.call("check_messages", recipient="dev-frontend")] == ["to the role"]
    err = team.error("send_message", **{"from": "a", "channel": "bob,carol", "content": "x", "instanceId": "i"})
    assert "INVALID_ARGUMENT" in err


def test_check_messages_order_since_tenant_and_mark_as_read(team):
    ids = [send(team, "alice", "carol", f"m{i}", tenantId="t1" if i % 2 else None)["messageId"] for i in range(6)]
    got = team.call("check_messages", recipient="carol")
    assert [m["content"] for m in got] == [f"m{i}" for i in range(6)]
    assert [m["messageId"] for m in got] == ids
    assert all(m["readAt"] is None and m["from"] == "alice" for m in got)
    assert [m["content"] for m in team.call("check_messages", recipient="carol", tenantId="t1")] == ["m1", "m3", "m5"]
    later = team.call("check_messages", recipient="carol", since=got[2]["createdAt"])
    assert all(m["createdAt"] > got[2]["createdAt"] for m in later)
    receipts = [m["receiptId"] for m in got[:4]]
    assert team.call("mark_as_read", receiptIds=receipts + receipts + ["rcp_unknown"]) == 4
    assert team.call("mark_as_read", receiptIds=receipts) == 0  # already read
    assert team.call("mark_as_read", receiptIds=[]) == 0
    assert [m["content"] for m in team.call("check_messages", recipient="carol")] == ["m4", "m5"]
    assert team.call("check_messages", recipient="carol", limit=1)[0]["content"] == "m4"
    status = team.call("list_broadcast_status", messageId=ids[0])
    assert status["receipts"][0]["read"] is True and status["receipts"][0]["readAt"] > 0


def test_delete_message_rbac_and_cascade(team):
    mid = send(team, "alice", "broadcast", "oops")["messageId"]
    assert "RBAC_DENIED" in team.error("delete_message", messageId=mid, callerOrchestrator="bob")
    assert team.call("get_message", messageId=mid)["content"] == "oops"
    assert team.call("delete_message", messageId=mid, callerOrchestrator="alice") == {
        "deleted": True, "receiptsDeleted": 3}
    assert team.call("get_message", messageId=mid) is None
    assert team.call("check_messages", recipient="bob") == []
    assert team.call("delete_message", messageId=mid, callerOrchestrator="alice") == {
        "deleted": False, "receiptsDeleted": 0}
    mid2 = send(team, "alice", "bob")["messageId"]
    assert team.call("delete_message", messageId=mid2, callerOrchestrator="system")["deleted"] is True
    assert "NOT_FOUND" in team.error("list_broadcast_status", messageId=mid2)


def test_list_messages_n_rows_filters_and_cursor(team):
    n = 53
    for i in range(n):
        send(team, "alice" if i % 3 else "bob", "carol" if i % 2 else "dave", f"n{i}", sessionDay=i % 4)
    first = team.call("list_messages")
    assert len(first["items"]) == 20 and "nextCursor" in first
    seen, cursor = [], None
    while True:
        page = team.call("list_messages", limit=11, **({"cursor": cursor} if cursor else {}))
        seen += [m["_id"] for m in page["items"]]
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    assert len(seen) == n and len(set(seen)) == n and seen == sorted(seen, reverse=True)
    by_bob = team.call("list_messages", limit=200, **{"from": "bob"})["items"]
    assert len(by_bob) == len([i for i in range(n) if i % 3 == 0]) and all(m["from"] == "bob" for m in by_bob)
    to_carol = team.call("list_messages", limit=200, channel="carol")["items"]
    assert len(to_carol) == len([i for i in range(n) if i % 2])
    day2 = team.call("list_messages", limit=200, sessionDay=2)["items"]
    assert len(day2) == len([i for i in range(n) if i % 4 == 2])
    lite = team.call("list_messages", fields="lite", limit=200)["items"]
    assert len(lite) == n and set(lite[0]) == {"_id", "_creationTime", "from", "channel", "createdAt"}
    assert team.call("list_messages", channel="nobody") == {"items": []}
    assert team.call("list_messages", limit=5000)["items"].__len__() == n  # clamped to 200 ≥ n


def test_search_messages_by_keyword(team):
    send(team, "alice", "bob", "The deploy of staging failed at 3am")
    send(team, "carol", "bob", "Lunch plans?")
    send(team, "alice", "dave", "staging is green again")
    hits = team.call("search_messages_by_keyword", query="staging", detail="full")["items"]
    assert len(hits) == 2 and all("[staging]" in h["snippet"] for h in hits)
    assert all(isinstance(h["score"], float) for h in hits)
    assert len(team.call("search_messages_by_keyword", query="staging", **{"from": "alice"}, channel="dave")["items"]) == 1
    assert team.call("search_messages_by_keyword", query="deploy failed")["items"][0]["from"] == "alice"
    assert team.call("search_messages_by_keyword", query="deploy lunch")["items"] == []


def test_messages_survive_a_new_server_on_the_same_file(settings):
    from conftest import open_tools

    from vantage_peers.server import create_app

    a = create_app(settings)
    with open_tools(a) as t:
        send(t, "alice", "bob", "persisted")
    a.db.close()
    b = create_app(settings)
    with open_tools(b) as t:
        assert [m["content"] for m in t.call("check_messages", recipient="bob")] == ["persisted"]
    b.db.close()


def test_keyword_search_answers_stay_under_the_envelope_cap(team):
    for i in range(12):
        send(team, "alice", "bob", f"needle {i} " + "hay " * 5000)
    out = team.call("search_messages_by_keyword", query="needle", limit=200)
    assert out["truncated"] is True and 0 < len(out["items"]) < 12
    assert "truncated" not in team.call("search_messages_by_keyword", query="needle", limit=1)
