"""The dashboard inside `serve` at /dashboard: sign-in required (the master secret or an OAuth
client, which acts only as its profile allows), tried from the attacker's side; and a real `serve`
process. What a client's session reads: test_dashboard_visibility.py."""

from __future__ import annotations

import re

import httpx2
import pytest
from conftest import make_settings
from starlette.testclient import TestClient
from support.dashboard_helpers import add_client, sign_in
from support.http_helpers import MASTER, serving

from vantage_peers.dashboard.mount import mount_dashboard
from vantage_peers.http.asgi import build_http_app
from vantage_peers.server import create_app

BASE = "http://127.0.0.1:3000"
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@pytest.fixture
def served(tmp_path):
    app = create_app(make_settings(tmp_path / "vp.db", bearer_secret_master=MASTER))
    starlette = build_http_app(app, host="127.0.0.1", port=3000)
    mount_dashboard(starlette, app, host="127.0.0.1", no_auth=False)
    with TestClient(starlette, base_url=BASE, follow_redirects=False) as client:
        yield app, client
    app.db.close()


def _client(app, client_id: str, secret: str, profile: str, **kw) -> None:
    add_client(app, client_id, secret, profile, **kw)


def _login(client: TestClient, **form: str):
    return sign_in(client, BASE, **form)


def test_every_view_needs_sign_in(served):
    _, client = served
    for path in ("/dashboard/team", "/dashboard/messages", "/dashboard/tasks", "/dashboard/memory",
                 "/dashboard/claims", "/dashboard/activity", "/dashboard/schedule", "/dashboard/missions"):
        r = client.get(path)
        assert r.status_code == 303 and r.headers["location"].startswith("/dashboard/login"), path
    assert client.get("/dashboard/events").status_code == 401
    # an action without a session is refused before anything runs
    r = client.post("/dashboard/actions/send", data={"to": "bob", "content": "x", "csrf": "x"})
    assert r.status_code in (303, 403)
    # a bearer token (good for /mcp) is not a dashboard session
    assert client.get("/dashboard/team", headers={"Authorization": f"Bearer {MASTER}"}).status_code == 303


def test_master_secret_signs_in_and_the_actor_is_recorded(served):
    app, client = served
    wrong = _login(client, name="Ann", secret="not-the-secret")
    assert wrong.status_code == 403 and "LOGIN_FAILED" in wrong.text
    assert client.get("/dashboard/team").status_code == 303
    ok = _login(client, name="Ann", secret=MASTER, next="/dashboard/messages")
    assert ok.status_code == 303 and ok.headers["location"] == "/dashboard/messages"
    assert "secure" not in ok.headers["set-cookie"].lower() or BASE.startswith("https")
    page = client.get("/dashboard/messages")
    assert page.status_code == 200 and "human:Ann" in page.text
    assert "Mode: <strong>keyword</strong>" in client.get("/dashboard/memory?q=anything").text
    token = _CSRF.search(page.text).group(1)
    sent = client.post("/dashboard/actions/send", data={"csrf": token, "to": "bob", "content": "from the web"},
                       headers={"Origin": BASE})
    assert sent.status_code == 303
    row = app.db.read(lambda c: c.one("SELECT actor, via FROM humanActions"))
    assert dict(row) == {"actor": "human:Ann", "via": "master"}
    assert app.db.read(lambda c: c.scalar("SELECT sender FROM messages")) == "human:Ann"
    out = client.post("/dashboard/logout", data={"csrf": token}, headers={"Origin": BASE})
    assert out.status_code == 303
    assert client.get("/dashboard/team").status_code == 303


def test_a_forged_or_foreign_cookie_is_not_a_session(served, tmp_path):
    _, client = served
    _login(client, name="Ann", secret=MASTER)
    mine = client.cookies.get("vp_dash")
    client.cookies.clear()

    def team(cookie: str) -> int:
        return client.get("/dashboard/team", headers={"Cookie": f"vp_dash={cookie}"}).status_code

    assert team(mine) == 200  # the control: a real session cookie, sent the same way
    body, mac = mine.rsplit(".", 1)
    assert team(body + "." + mac[::-1]) == 303
    assert team("eyJuIjoiZXZlIiwidiI6Im1hc3RlciIsIm8iOiJ4IiwiZSI6OTk5OTk5OTk5OX0." + mac) == 303
    # a cookie signed by another server (another master secret) is refused too
    other_app = create_app(make_settings(tmp_path / "other.db", bearer_secret_master="b4" * 32))
    other = build_http_app(other_app, host="127.0.0.1", port=3000)
    mount_dashboard(other, other_app, host="127.0.0.1", no_auth=False)
    with TestClient(other, base_url=BASE, follow_redirects=False) as stranger:
        assert _login(stranger, name="Eve", secret="b4" * 32).status_code == 303
        stolen = stranger.cookies.get("vp_dash")
    other_app.db.close()
    assert stolen and team(stolen) == 303


def test_any_oauth_client_signs_in_and_acts_only_as_its_profile_allows(served):
    app, client = served
    _client(app, "vp_client_ops", "s3cret-ops", "ops-dashboard")
    _client(app, "vp_client_narrow", "s3cret-narrow", "narrow", read=("project/a",), allow=("agent-a",))
    _client(app, "vp_client_named", "s3cret-named", "named", allow=("human:Bo",))
    assert _login(client, name="Ann", secret="wrong", client_id="vp_client_ops").status_code == 403
    assert _login(client, name="Ann", secret="", client_id="vp_client_nobody").status_code == 403
    # a client that may not act as the person signs in read-only (tests/dashboard/test_dashboard_visibility.py)
    assert _login(client, name="Ann", secret="s3cret-narrow", client_id="vp_client_narrow").status_code == 303
    page = client.get("/dashboard/messages")
    assert page.status_code == 200 and "read-only" in page.text and "/actions/send" not in page.text
    token = _CSRF.search(page.text).group(1)
    refused = client.post("/dashboard/actions/send", data={"csrf": token, "to": "bob", "content": "x"},
                          headers={"Origin": BASE})
    assert refused.status_code == 403 and "may read but not act" in refused.text
    client.cookies.clear()
    assert _login(client, name="Ann", secret="s3cret-named", client_id="vp_client_named").status_code == 303
    assert "read-only" in client.get("/dashboard/team").text  # named for Bo, not for Ann
    client.cookies.clear()
    assert _login(client, name="Bo", secret="s3cret-named", client_id="vp_client_named").status_code == 303
    page = client.get("/dashboard/messages")
    assert page.status_code == 200 and "/actions/send" in page.text and "read-only" not in page.text
    # revoking the client ends its sessions on the next request
    app.db.write(lambda c: c.execute("UPDATE oauth_clients SET revokedAt = 1 WHERE clientId = 'vp_client_named'"))
    assert client.get("/dashboard/team").status_code == 303


def test_a_non_loopback_bind_always_signs_in(tmp_path):
    app = create_app(make_settings(tmp_path / "vp.db", bearer_secret_master=MASTER))
    starlette = build_http_app(app, host="0.0.0.0", port=3000)
    with pytest.raises(ValueError):
        mount_dashboard(starlette, app, host="0.0.0.0", no_auth=True)
    mount_dashboard(starlette, app, host="0.0.0.0", no_auth=False)
    with TestClient(starlette, base_url="http://10.1.2.3:3000", follow_redirects=False) as client:
        assert client.get("/dashboard/team").status_code == 303
    app.db.close()


@pytest.mark.slow
def test_real_serve_process_mounts_the_dashboard_behind_sign_in(tmp_path):
    with serving(tmp_path / "srv.db") as server:
        r = server.http("GET", "/dashboard/team", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/dashboard/login")
        with httpx2.Client(base_url=server.base, follow_redirects=False, timeout=30) as web:
            page = web.get("/dashboard/login")
            token = _CSRF.search(page.text).group(1)
            ok = web.post("/dashboard/login", data={"csrf": token, "name": "Ann", "secret": MASTER},
                          headers={"Origin": server.base})
            assert ok.status_code == 303
            team = web.get("/dashboard/team")
            assert team.status_code == 200 and "human:Ann" in team.text
            assert web.get("/dashboard/static/dashboard.css").status_code == 200
        assert server.http("GET", "/health").status_code == 200


def test_the_documented_token_cli_path_grants_the_dashboard(served, tmp_path, monkeypatch, capsys):
    import json

    from vantage_peers.cli import main

    app, client = served
    monkeypatch.setenv("VP_DB_PATH", str(app.settings.db_path))
    monkeypatch.chdir(tmp_path)
    assert main(["token", "profile", "set", "ops-dashboard", "--read", "*", "--read-records", "team",
                 "--from", "human:Dana"]) == 0
    capsys.readouterr()
    assert main(["token", "create", "--name", "dana", "--profile", "ops-dashboard"]) == 0
    made = json.loads(capsys.readouterr().out)
    eve = _login(client, name="Eve", secret=made["client_secret"], client_id=made["client_id"])
    assert eve.status_code == 303 and "read-only" in client.get("/dashboard/team").text  # not human:Eve
    client.cookies.clear()
    ok = _login(client, name="Dana", secret=made["client_secret"], client_id=made["client_id"])
    assert ok.status_code == 303
    page = client.get("/dashboard/team")
    assert page.status_code == 200 and "human:Dana" in page.text and made["client_id"] in page.text
    assert "read-only" not in page.text
