"""Issue #19 case 5 on a real `serve`: registration caps and redirect URI schemes, per-address rate
limits on /oauth/register and /oauth/token, failed-client-auth backoff (429 + Retry-After), and the
metadata listing exactly the client auth methods accepted."""

from __future__ import annotations

import time

import pytest
from support.http_helpers import make_client, serving

from vantage_peers.http.limits import redirect_uri_problem


@pytest.fixture(scope="module")
def roomy(tmp_path_factory):
    """High limits: only the caps are exercised here."""
    db = tmp_path_factory.mktemp("oauth-caps") / "vp.db"
    with serving(db, env={"VP_OAUTH_REGISTER_PER_MINUTE": "10000", "VP_OAUTH_TOKEN_PER_MINUTE": "10000"}) as srv:
        yield srv


@pytest.fixture(scope="module")
def tight(tmp_path_factory):
    db = tmp_path_factory.mktemp("oauth-limits") / "vp.db"
    with serving(db, env={"VP_OAUTH_REGISTER_PER_MINUTE": "5", "VP_OAUTH_TOKEN_PER_MINUTE": "40"}) as srv:
        yield srv


def register(server, **body):
    return server.http("POST", "/oauth/register", json={"client_name": "t",
                                                        "redirect_uris": ["http://127.0.0.1:9/cb"], **body})


def client_count(server) -> int:
    import apsw

    conn = apsw.Connection(str(server.db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute("SELECT count(*) FROM oauth_clients").fetchall()[0][0]
    finally:
        conn.close()


def test_huge_client_name_is_refused_and_nothing_is_stored(roomy):
    before = client_count(roomy)
    size_before = roomy.db.stat().st_size
    for _ in range(8):
        r = register(roomy, client_name="x" * 3_900_000)
        assert r.status_code in (400, 413), r.status_code
    assert client_count(roomy) == before
    assert roomy.db.stat().st_size - size_before < 1_000_000


@pytest.mark.parametrize("body,needle", [
    ({"client_name": "n" * 201}, "client_name"),
    ({"redirect_uris": [f"https://app.example/cb{i}" for i in range(11)]}, "redirect_uris"),
    ({"redirect_uris": ["https://app.example/" + "a" * 2000]}, "redirect_uris"),
    ({"client_uri": "https://app.example/" + "a" * 2000}, "client_uri"),
    ({"contacts": [f"a{i}@example.com" for i in range(11)]}, "contacts"),
    ({"software_id": "s" * 201}, "software_id"),
    ({"x_custom": ["v" * 100] * 100}, "x_custom"),
])
def test_every_metadata_field_is_capped(roomy, body, needle):
    r = register(roomy, **body)
    assert r.status_code == 400 and needle in r.json()["error_description"], r.text


def test_caps_are_inclusive(roomy):
    r = register(roomy, client_name="n" * 200, redirect_uris=[f"https://app.example/{i}" for i in range(10)])
    assert r.status_code == 201, r.text


@pytest.mark.parametrize("uri", ["javascript:alert(1)", "JavaScript:alert(1)", "data:text/html,<script>1</script>",
                                 "file:///etc/passwd", "vbscript:msgbox(1)", "http://evil.example/cb",
                                 "http://127.0.0.1.evil.example/cb", "http://127.0.0.1@evil.example/cb",
                                 "https://app.example/cb#frag", "not a uri", ""])
def test_dangerous_redirect_uris_are_refused(roomy, uri):
    r = register(roomy, redirect_uris=[uri])
    assert r.status_code == 400, (uri, r.text)
    assert r.json()["error"] in ("invalid_redirect_uri", "invalid_client_metadata")


@pytest.mark.parametrize("uri", ["https://app.example/cb", "http://127.0.0.1:33418/cb", "http://localhost/cb",
                                 "http://[::1]:8080/cb", "com.example.app:/cb", "cursor://anysphere.cursor-mcp/cb"])
def test_allowed_redirect_uris(roomy, uri):
    r = register(roomy, redirect_uris=[uri])
    assert r.status_code == 201, (uri, r.text)
    assert r.json()["redirect_uris"] == [uri]


def test_metadata_lists_exactly_the_accepted_auth_methods(roomy):
    asm = roomy.http("GET", "/.well-known/oauth-authorization-server").json()
    assert sorted(asm["token_endpoint_auth_methods_supported"]) == ["client_secret_basic", "client_secret_post", "none"]
    for method in asm["token_endpoint_auth_methods_supported"]:  # each one is really accepted
        grants = ["authorization_code", "refresh_token"]
        r = register(roomy, token_endpoint_auth_method=method, grant_types=grants)
        assert r.status_code == 201, (method, r.text)
    assert register(roomy, token_endpoint_auth_method="private_key_jwt").status_code == 400


def test_registration_is_rate_limited_per_address(tight):
    statuses = [register(tight).status_code for _ in range(8)]
    assert statuses[:5] == [201] * 5
    refused = tight.http("POST", "/oauth/register", json={"client_name": "t", "redirect_uris": ["http://127.0.0.1:9/cb"]})
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
    assert "RATE_LIMITED" in refused.json()["error_description"]
    assert statuses.count(201) <= 6  # at most one token refilled while the loop ran


@pytest.mark.slow
def test_wrong_client_secrets_back_off_then_429_and_the_token_bucket(tight):
    client = make_client(tight, "client-generic", grantTypes=["client_credentials"])
    cid, secret = client["client_id"], client["client_secret"]

    def token(secret_value, **extra):
        return tight.http("POST", "/oauth/token", data={"grant_type": "client_credentials", "client_id": cid,
                                                        "client_secret": secret_value, **extra})

    statuses = []
    for i in range(30):
        r = token(f"wrong-{i}")
        statuses.append(r.status_code)
        if r.status_code == 429:
            assert int(r.headers["retry-after"]) >= 1
            assert "failed client authentications" in r.json()["error_description"]
            break
    assert statuses[0] == 401 and statuses[-1] == 429, statuses
    assert len(statuses) <= 7  # 5 free failures, then the lock-out
    assert token(secret).status_code == 429  # even the right secret waits out the lock-out
    time.sleep(float(r.headers["retry-after"]) + 0.5)
    assert token(secret).status_code == 200  # a success clears the failures
    # The per-address bucket (40 a minute here): requests that authenticate but fail (invalid scope). The
    # bucket refills as time passes (a slow machine gets more through): send until it refuses, count nothing.
    codes = []
    for _ in range(1000):
        refused = token(secret, scope="bogus")
        codes.append(refused.status_code)
        if refused.status_code == 429:
            break
    assert codes[0] == 400 and codes[-1] == 429, codes
    assert "token requests" in refused.json()["error_description"]


def test_redirect_uri_rule_unit():
    assert redirect_uri_problem("com.example.app:/cb") is None
    assert redirect_uri_problem("javascript:alert(1)")
    assert redirect_uri_problem("http://localhost:1@evil.example/cb")
    assert redirect_uri_problem("https://a.example/\x00")


def test_approve_never_redirects_to_a_stored_javascript_uri(roomy):
    """A client stored before the rule (here through the admin API, which an operator drives) with a
    `javascript:` redirect URI: Approve answers 400, never `302 Location: javascript:…`."""
    import base64
    import hashlib
    import re

    import anyio
    import httpx2

    bad = "javascript:alert(1)"
    made = roomy.master("POST", "/admin/oauth/clients", json={
        "name": "legacy", "scopeProfile": "client-generic", "redirectUris": [bad],
        "grantTypes": ["authorization_code", "refresh_token"]})
    if made.status_code != 201:
        pytest.skip(f"the admin API refused the legacy client ({made.status_code}): nothing to approve")
    client_id = made.json()["client_id"]
    challenge = base64.urlsafe_b64encode(hashlib.sha256(b"v" * 64).digest()).rstrip(b"=").decode()
    url = (f"{roomy.base}/oauth/authorize?response_type=code&client_id={client_id}&redirect_uri={bad}"
           f"&code_challenge={challenge}&code_challenge_method=S256&scope=mcp:full&state=s")

    async def flow():
        async with httpx2.AsyncClient(timeout=30) as browser:
            first = await browser.get(url)
            if first.status_code != 302 or "/oauth/consent" not in first.headers.get("location", ""):
                return first
            page = await browser.get(first.headers["location"])
            rid = re.search(r'name="request" value="([^"]+)"', page.text).group(1)
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
            return await browser.post(f"{roomy.base}/oauth/consent", data={"request": rid, "csrf": csrf,
                                                                             "action": "approve"})

    done = anyio.run(flow)
    assert not done.headers.get("location", "").lower().startswith("javascript:"), done.headers
    assert done.status_code == 400, (done.status_code, done.text[:300])
