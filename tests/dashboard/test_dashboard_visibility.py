"""#32: the dashboard behind `serve` shows a signed-in OAuth client what a token of that client reads
(policy.readers_of / read_prefixes), tried from the attacker's side on the SQLite file and on
PostgreSQL.

alice sends bob "rotate the prod keys" and assigns him a task about it in her mission. carol's client
(acting as carol, own records) signs in and finds none of it in any view, by list or by direct URL
(404), nor in a live re-fetch; dave's client, widened to the team's records, sees it all; Ann's client
(acting as human:Ann) may step in only on what she can read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from conftest import make_settings, open_tools
from starlette.testclient import TestClient
from support.dashboard_helpers import add_client, sign_in
from support.http_helpers import MASTER

from vantage_peers.dashboard.mount import mount_dashboard
from vantage_peers.http.asgi import build_http_app

pytestmark = pytest.mark.backends
BASE = "http://127.0.0.1:3000"
SECRET = "rotate the prod keys tonight"
TASK = "Rotate keys on prod-db"
NOTE = "prod root password is hunter2"
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')
VIEWS = ("/team", "/messages", "/tasks", "/tasks?status=todo", "/missions", "/claims", "/activity", "/memory",
         "/memory?q=password", "/schedule")


@pytest.fixture
def settings(db_path, database_url):
    return make_settings(db_path, database_url=database_url, bearer_secret_master=MASTER)


@pytest.fixture
def world(app) -> Iterator[tuple[TestClient, dict[str, str]]]:
    with open_tools(app) as tools:  # a local process: acts as anyone it names
        for who in ("alice", "bob", "carol"):
            tools.call("update_profile", orchestratorId=who, static={"role": "dev"})
        ids = {"secret": tools.call("send_message", channel="bob", content=SECRET, **{"from": "alice"})["messageId"],
               "team": tools.call("send_message", channel="broadcast", content="standup at ten",
                                  **{"from": "alice"})["messageId"],
               "mission": tools.call("create_mission", name="Key rotation", project="ops", status="execute",
                                     priority="high", pilot="alice", agents=["alice", "bob"], createdBy="alice")}
        ids["task"] = tools.call("create_task", title=TASK, priority="high", createdBy="alice", assignedTo="bob",
                                 missionId=ids["mission"])
        ids["open"] = tools.call("create_task", title="Open chore anyone may take", priority="low",
                                 createdBy="alice")
        tools.call("checkout_task", taskId=ids["task"], callerOrchestrator="bob")  # a claim lease: Claims lists it
        tools.call("store_memory", namespace="project/alice", type="fact", content=NOTE, createdBy="alice")
        tools.call("store_memory", namespace="project/carol", type="fact", content="carol's password hint: blue",
                   createdBy="carol")
    add_client(app, "vp_client_carol", "s-carol", "carol-agent", read=("project/carol",), allow=("carol",))
    add_client(app, "vp_client_dave", "s-dave", "dave-agent", read=("project/carol",), allow=("dave",),
               records="team")
    add_client(app, "vp_client_ann", "s-ann", "ann-ops", read=("project/carol",), allow=("human:Ann",))
    starlette = build_http_app(app, host="127.0.0.1", port=3000)
    mount_dashboard(starlette, app, host="127.0.0.1", no_auth=False)
    with TestClient(starlette, base_url=BASE, follow_redirects=False) as client:
        yield client, ids


def _as(client: TestClient, who: str, name: str) -> None:
    client.cookies.clear()
    r = sign_in(client, BASE, name=name, secret=f"s-{who}", client_id=f"vp_client_{who}")
    assert r.status_code == 303, r.text


def _page(client: TestClient, path: str, **headers: str) -> str:
    r = client.get("/dashboard" + path, headers=headers)
    assert r.status_code == 200, (path, r.status_code, r.text[:300])
    return r.text


def test_a_scoped_client_sees_nothing_of_alice_to_bob(world):
    client, ids = world
    _as(client, "carol", "Carol")
    for path in VIEWS:
        html = _page(client, path)
        assert SECRET not in html and TASK not in html and NOTE not in html, path
        assert ids["secret"] not in html and ids["task"] not in html, path
    assert "standup at ten" in _page(client, "/messages")  # the broadcast reached carol
    assert "Open chore anyone may take" in _page(client, "/tasks")  # open work: anyone may claim it
    assert "carol&#39;s password hint" in _page(client, "/memory")  # her own namespace
    assert "Key rotation" in _page(client, "/missions")  # missions are the team's
    assert TASK not in _page(client, f"/missions/{ids['mission']}")  # …but not the tasks she may not read
    for path in (f"/messages/{ids['secret']}", f"/tasks/{ids['task']}"):
        r = client.get("/dashboard" + path)
        assert r.status_code == 404 and SECRET not in r.text and TASK not in r.text, path
    # a live update re-fetches the page's fragment through the same rule
    partial = _page(client, "/messages", **{"X-Partial": "1"})
    assert SECRET not in partial and "standup at ten" in partial
    # she may read, not act: every action is refused before it runs
    token = _CSRF.search(_page(client, "/messages")).group(1)
    for path, form in (("/actions/send", {"to": "bob", "content": "hi"}),
                       (f"/actions/tasks/{ids['task']}/cancel", {"reason": "mine now"})):
        r = client.post("/dashboard" + path, data={"csrf": token, **form}, headers={"Origin": BASE})
        assert r.status_code == 403, path


def test_a_client_widened_to_the_team_sees_every_message_and_task(world):
    client, ids = world
    _as(client, "dave", "Dave")
    assert SECRET in _page(client, "/messages") and TASK in _page(client, "/tasks")
    assert SECRET in _page(client, f"/messages/{ids['secret']}")
    assert TASK in _page(client, f"/tasks/{ids['task']}") and TASK in _page(client, "/claims")
    assert TASK in _page(client, f"/missions/{ids['mission']}") and SECRET in _page(client, "/activity")
    assert NOTE not in _page(client, "/memory")  # memories stay by namespace


def test_an_acting_client_steps_in_only_on_what_it_reads(world, app):
    client, ids = world
    _as(client, "ann", "Ann")
    token = _CSRF.search(_page(client, "/messages")).group(1)
    sent = client.post("/dashboard/actions/send", data={"csrf": token, "to": "bob", "content": "from Ann"},
                       headers={"Origin": BASE})
    assert sent.status_code == 303
    assert "from Ann" in _page(client, "/messages")  # she sent it: hers to read
    cancel = client.post(f"/dashboard/actions/tasks/{ids['task']}/cancel",
                         data={"csrf": token, "reason": "not yours"}, headers={"Origin": BASE})
    assert cancel.status_code == 404
    status = app.db.read(lambda c: c.scalar("SELECT status FROM tasks WHERE id = ?", (ids["task"],)))
    assert status == "in_progress"
    released = client.post(f"/dashboard/actions/tasks/{ids['open']}/cancel",
                           data={"csrf": token, "reason": "duplicate"}, headers={"Origin": BASE})
    assert released.status_code == 303  # open work is everyone's to read, and she is an overseer of it
