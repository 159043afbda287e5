"""#32 items 4 and 5, from the attacker's side over real HTTP: a scoped token reads the messages and
tasks its identities are parties to, never the rest of the team's (alice → bob "rotate the prod
keys" is invisible to carol's token), and never another identity's inbox or task queue resource.
A profile widened with `recordReadScope: team` (dave's) reads every message and task, and still
not another identity's inbox. On the SQLite file and on PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.http_helpers import MASTER, scoped_token, serving, text

pytestmark = pytest.mark.backends
SECRET = "rotate the prod keys tonight"


def profile(who: str, records: str = "own") -> dict[str, Any]:
    return {"profileId": f"{who}-agent", "description": f"acts as {who}", "fromAllowList": [who],
            "namespaceReadPrefixes": [f"project/{who}"], "namespaceWritePrefixes": [f"project/{who}"],
            "recordReadScope": records}


@pytest.fixture
def world(tmp_path, database_url):
    env = {"VP_EMBEDDINGS": "none", **({"VP_DATABASE_URL": database_url} if database_url else {})}
    with serving(tmp_path / "vp.db", env=env) as server:
        tokens = {who: scoped_token(server, profile(who)) for who in ("alice", "bob", "carol")}
        tokens["dave"] = scoped_token(server, profile("dave", "team"))  # a widened profile

        async def seed(client):
            async def call(tool, **args):
                r = await client.call_tool(tool, args)
                assert not r.is_error, text(r)
                data = r.structured_content
                return data.get("result", data) if isinstance(data, dict) else data

            for who in ("alice", "bob", "carol"):
                await call("update_profile", orchestratorId=who, static={"role": "dev"})
            ids = {"secret": (await call("send_message", channel="bob", content=SECRET, **{"from": "alice"}))["messageId"],
                   "team": (await call("send_message", channel="broadcast", content="standup at ten",
                                       **{"from": "alice"}))["messageId"],
                   "task": await call("create_task", title="rotate keys", priority="high", createdBy="alice",
                                      assignedTo="bob", description=SECRET),
                   "open": await call("create_task", title="open rotate work", priority="low", createdBy="alice")}
            return ids

        ids = server.mcp(MASTER, seed)
        yield server, tokens, ids


def run(server, token, fn):
    return server.mcp(token, fn)


async def _call(client, tool, **args):
    r = await client.call_tool(tool, args)
    data = r.structured_content
    return r.is_error, text(r), (data.get("result", data) if isinstance(data, dict) and set(data) == {"result"}
                                 else data)


async def _everything(client, ids):
    """What a token gets from every read path of messages and tasks (tools and the UI resource)."""
    out = {}
    _, _, out["list"] = await _call(client, "list_messages")
    _, _, out["search"] = await _call(client, "search_messages_by_keyword", query="rotate prod keys")
    _, _, out["get"] = await _call(client, "get_message", messageId=ids["secret"])
    out["status_err"], out["status_text"], _ = await _call(client, "list_broadcast_status",
                                                            messageId=ids["secret"])
    _, _, out["tasks"] = await _call(client, "list_tasks", status="all")
    _, _, out["task"] = await _call(client, "get_task", taskId=ids["task"])
    _, _, out["task_search"] = await _call(client, "search_tasks_by_keyword", query="rotate")
    for name in ("messages-feed?limit=50", "tasks-table?status=all&limit=50"):
        ui = await client.read_resource(f"ui://vp/v1/{name}")
        out[name.split("?")[0]] = " ".join(getattr(c, "text", "") for c in ui.contents)
    return out


def test_a_third_token_reads_nothing_of_alice_to_bob(world):
    server, tokens, ids = world
    got = run(server, tokens["carol"], lambda client: _everything(client, ids))
    listed = [m["_id"] for m in got["list"]["items"]]
    assert ids["secret"] not in listed and ids["team"] in listed  # a broadcast reached carol: hers to read
    assert got["search"]["items"] == []
    assert got["get"] is None
    assert got["status_err"] and "NOT_FOUND" in got["status_text"]
    task_ids = [t["_id"] for t in got["tasks"]["items"]]
    assert ids["task"] not in task_ids and ids["open"] in task_ids  # open work: anyone may claim it
    assert got["task"] is None
    assert [t["_id"] for t in got["task_search"]["items"]] == [ids["open"]]
    assert SECRET not in got["messages-feed"]
    assert "open rotate work" in got["tasks-table"] and "rotate keys" not in got["tasks-table"]


def test_a_profile_widened_to_the_team_reads_every_message_and_task(world):
    server, tokens, ids = world
    got = run(server, tokens["dave"], lambda client: _everything(client, ids))
    assert ids["secret"] in [m["_id"] for m in got["list"]["items"]]
    assert ids["secret"] in [m["_id"] for m in got["search"]["items"]]
    assert got["get"]["content"] == SECRET and not got["status_err"]
    assert {ids["task"], ids["open"]} <= {t["_id"] for t in got["tasks"]["items"]}
    assert got["task"]["_id"] == ids["task"]
    assert {t["_id"] for t in got["task_search"]["items"]} == {ids["task"], ids["open"]}
    assert SECRET in got["messages-feed"] and "rotate keys" in got["tasks-table"]


def test_the_parties_read_their_own(world):
    server, tokens, ids = world
    for who in ("alice", "bob"):
        async def reader(client):
            _, _, listed = await _call(client, "list_messages")
            _, _, got = await _call(client, "get_message", messageId=ids["secret"])
            _, _, task = await _call(client, "get_task", taskId=ids["task"])
            return [m["_id"] for m in listed["items"]], got, task

        listed, got, task = run(server, tokens[who], reader)
        assert ids["secret"] in listed, who
        assert got["content"] == SECRET and task["_id"] == ids["task"], who


def test_personal_resources_of_another_identity_are_refused(world):
    server, tokens, _ = world

    async def alice(client):
        outcomes = {}
        for uri in ("vp://inbox/bob", "vp://tasks/bob", "vp://inbox/alice"):
            try:
                r = await client.read_resource(uri)
                outcomes[uri] = json.loads(r.contents[0].text)
            except Exception as err:  # noqa: BLE001 - the refusal is what we look for
                outcomes[uri] = str(err)
        return outcomes

    got = run(server, tokens["alice"], alice)
    assert "FORBIDDEN" in str(got["vp://inbox/bob"]) and "FORBIDDEN" in str(got["vp://tasks/bob"])
    assert isinstance(got["vp://inbox/alice"], dict)
    # reading the team's records does not make another identity's inbox its own
    widened = run(server, tokens["dave"], alice)
    assert "FORBIDDEN" in str(widened["vp://inbox/bob"]) and "FORBIDDEN" in str(widened["vp://tasks/bob"])
