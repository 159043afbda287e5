"""CIMD without egress (issue #31): `VP_CIMD=off` stops offering (and fetching) metadata documents
while DCR stays; `auto` stops offering them once a document's host cannot be reached and offers them
again after a fetch succeeds; a refused client seen from a browser gets a page that says what to do."""

from __future__ import annotations

from urllib.parse import quote

from support.http_helpers import REDIRECT, Docs, Serve, free_port, serving

from vantage_peers.http.cimd_mode import QUIET_SECONDS, CimdPolicy

BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
FLAG = "client_id_metadata_document_supported"


def authorize(server: Serve, client_id: str, headers: dict[str, str] | None = None):
    return server.http("GET", f"/oauth/authorize?response_type=code&client_id={quote(client_id, safe='')}"
                              f"&redirect_uri={quote(REDIRECT, safe='')}&code_challenge={'A' * 43}"
                              "&code_challenge_method=S256&state=st&scope=mcp:full", headers=headers or {})


def offered(server: Serve) -> bool:
    r = server.http("GET", "/.well-known/oauth-authorization-server")
    assert r.status_code == 200 and r.json()["registration_endpoint"] == f"{server.base}/oauth/register"
    return r.json().get(FLAG) is True


def test_off_stops_offering_cimd_keeps_dcr_and_explains_itself(tmp_path):
    docs = Docs()
    try:
        url = docs.document("/off.json")
        with serving(tmp_path / "off.db", env={"VP_CIMD": "off", "VP_CIMD_TEST_LOOPBACK": "1"}) as server:
            assert not offered(server)
            r = server.http("POST", "/oauth/register", json={"client_name": "dcr", "redirect_uris": [REDIRECT]})
            assert r.status_code == 201, r.text
            page = authorize(server, url, BROWSER)
            program = authorize(server, url)
    finally:
        docs.httpd.shutdown()
    assert page.status_code == 400 and page.headers["content-type"].startswith("text/html"), page.text
    assert "VP_CIMD=off" in page.text and f"{server.base}/oauth/register" in page.text
    assert "Authorization: Bearer" in page.text and "vantage-peers token create" in page.text
    assert "<script" not in page.text and url in page.text
    assert program.status_code == 400 and program.json()["error_description"].startswith("CIMD_REFUSED:")
    assert docs.hits.get("/off.json", 0) == 0  # off: nothing is fetched


def test_auto_stops_offering_when_documents_cannot_be_reached_and_resumes(tmp_path):
    docs = Docs()
    try:
        good = docs.document("/good.json")
        closed = f"http://127.0.0.1:{free_port()}/client.json"  # nothing listens: no connection can be made
        with serving(tmp_path / "auto.db", env={"VP_CIMD_TEST_LOOPBACK": "1"}) as server:  # auto by default
            assert offered(server)
            page = authorize(server, closed, BROWSER)
            assert page.status_code == 400 and page.headers["content-type"].startswith("text/html")
            assert "could not be reached" in page.text and "VP_CIMD=off" in page.text, page.text
            assert not offered(server)  # the next sign-in uses DCR
            assert server.http("GET", "/.well-known/oauth-authorization-server").headers["cache-control"] == "no-cache"
            ok = authorize(server, good, BROWSER)  # a client that still tries, once the network is back
            assert ok.status_code == 302 and "/oauth/consent" in ok.headers["location"], ok.text
            assert offered(server)
    finally:
        docs.httpd.shutdown()


def test_on_keeps_offering_after_an_unreachable_document(tmp_path):
    with serving(tmp_path / "on.db", env={"VP_CIMD": "on", "VP_CIMD_TEST_LOOPBACK": "1"}) as server:
        assert authorize(server, f"http://127.0.0.1:{free_port()}/c.json").status_code == 400
        assert offered(server)


def test_bad_setting_stops_serve(tmp_path):
    import subprocess

    from support.http_helpers import script

    r = subprocess.run([script(), "serve", "--port", str(free_port())], env={"VP_CIMD": "sometimes",
                       "VP_DB_PATH": str(tmp_path / "x.db"), "BEARER_SECRET_MASTER": "a" * 64, "PATH": "/usr/bin:/bin"},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "VP_CIMD must be on, off or auto" in r.stderr


def test_policy_quiet_period_unit():
    now = [100.0]
    policy = CimdPolicy("auto", clock=lambda: now[0])
    assert policy.advertised() and policy.fetches
    policy.unreachable()
    assert not policy.advertised() and policy.fetches  # it still tries when a client asks
    now[0] += QUIET_SECONDS
    assert policy.advertised()
    policy.unreachable()
    policy.reached()
    assert policy.advertised()
    assert not CimdPolicy("off").advertised() and not CimdPolicy("off").fetches
