"""`vantage-peers serve` over real HTTP on 127.0.0.1: bearer auth, the OAuth 2.1 server, admin routes."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import time
from urllib.parse import parse_qs, urlparse

import anyio
import apsw
import httpx2
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from support.http_helpers import MASTER, client_credentials_token, make_client, mcp_session, serving, text

REDIRECT = "http://127.0.0.1:9/callback"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("http") / "vp.db") as s:
        yield s


class Memory:
    """TokenStorage in memory."""

    def __init__(self):
        self.tokens = None
        self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, info):
        self.client = info


def sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


async def consent(base: str, authorize_url: str, action: str = "approve") -> httpx2.Response:
    """Play the browser: follow /oauth/authorize to the consent page and post the form."""
    async with httpx2.AsyncClient(timeout=30) as browser:
        first = await browser.get(authorize_url)
        assert first.status_code == 302, first.text
        page = await browser.get(first.headers["location"])
        assert page.status_code == 200 and "Approve" in page.text
        assert page.headers["x-frame-options"] == "DENY"
        rid = re.search(r'name="request" value="([^"]+)"', page.text).group(1)
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
        return await browser.post(f"{base}/oauth/consent", data={"request": rid, "csrf": csrf, "action": action})


def register(server, **body) -> dict:
    r = server.http("POST", "/oauth/register", json={"client_name": "t", "redirect_uris": [REDIRECT], **body})
    assert r.status_code == 201, r.text
    return r.json()


def authorize_code(server, client: dict, challenge: str, state: str = "s1") -> str:
    url = (f"{server.base}/oauth/authorize?response_type=code&client_id={client['client_id']}"
           f"&redirect_uri={REDIRECT}&code_challenge={challenge}&code_challenge_method=S256&scope=mcp:full"
           f"&state={state}")
    done = anyio.run(consent, server.base, url)
    assert done.status_code == 302
    query = parse_qs(urlparse(done.headers["location"]).query)
    assert query["state"] == [state]
    return query["code"][0]


def exchange(server, client: dict, code: str, verifier: str, redirect: str = REDIRECT) -> httpx2.Response:
    return server.http("POST", "/oauth/token", data={
        "grant_type": "authorization_code", "code": code, "client_id": client["client_id"],
        "client_secret": client["client_secret"], "redirect_uri": redirect, "code_verifier": verifier})


# -- endpoints without auth ----------------------------------------------------------------------------
def test_health_and_discovery_documents(server):
    health = server.http("GET", "/health").json()
    assert health == {"status": "ok", "service": "vantage-peers-mcp-http", "version": health["version"],
                      "transport": "streamable-http", "oauth": "supported", "scopes": ["mcp:full"]}
    asm = server.http("GET", "/.well-known/oauth-authorization-server").json()
    assert asm["issuer"] == server.base
    assert asm["registration_endpoint"] == f"{server.base}/oauth/register"
    assert asm["authorization_endpoint"] == f"{server.base}/oauth/authorize"
    assert asm["token_endpoint"] == f"{server.base}/oauth/token"
    assert asm["code_challenge_methods_supported"] == ["S256"]
    assert "client_credentials" in asm["grant_types_supported"]
    prm = server.http("GET", "/.well-known/oauth-protected-resource").json()
    assert prm["resource"] == server.url and prm["authorization_servers"] == [server.base]
    pre = server.http("OPTIONS", "/mcp", headers={"Origin": "https://claude.ai", "Access-Control-Request-Method":
                                                   "POST", "Access-Control-Request-Headers": "authorization,mcp-session-id"})
    assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == "*"
    for method in ("GET", "POST", "DELETE", "OPTIONS"):
        assert method in pre.headers["access-control-allow-methods"]


def test_mcp_without_or_with_a_bad_token_is_401_with_resource_metadata(server):
    expected = (f'Bearer resource_metadata="{server.base}/.well-known/oauth-protected-resource", '
                'scope="mcp:full"')
    rejected = expected + ', error="invalid_token", error_description="the bearer token is invalid or expired"'
    # no credentials: the challenge names where to authorize and the scope, but no error code (RFC 6750)
    for headers in ({}, {"Authorization": "Bearer " + "0" * 64}, {"Authorization": "Bearer x"},
                    {"Authorization": "Basic Zm9vOmJhcg=="}, {"Authorization": f"Bearer {MASTER[:-1]}"}):
        r = server.http("POST", "/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert r.status_code == 401
        assert r.headers["www-authenticate"] == (rejected if headers else expected), headers
        assert r.json() == {"error": "invalid_token", "error_description": "Bearer token is missing or invalid"}


def test_master_bearer_lists_and_calls_tools_over_streamable_http(server):
    async def go(client):
        names = {t.name for t in (await client.list_tools()).tools}
        sent = await client.call_tool("send_message", {"channel": "bob", "content": "over http ✓", "from": "alice"})
        got = await client.call_tool("check_messages", {"recipient": "bob"})
        system = await client.call_tool("store_memory", {"namespace": "global", "type": "note",
                                                         "content": "master writes global", "createdBy": "system"})
        return names, sent, got, system

    names, sent, got, system = server.mcp(MASTER, go)
    assert len(names) > 80 and {"send_message", "recall", "store_memory"} <= names
    assert not sent.is_error and sent.structured_content["messageId"].startswith("msg_")
    assert [m["content"] for m in got.structured_content["result"]] == ["over http ✓"]
    assert not system.is_error
    # A bare JSON-RPC POST works too (stateless transport), as the seeds' curl check does.
    r = server.master("POST", "/mcp", headers={"Accept": "application/json, text/event-stream"},
                      json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    assert r.status_code == 200 and "send_message" in r.text


# -- DCR and the authorization-code flow --------------------------------------------------------------------
def test_full_oauth_flow_with_the_sdk_client_provider(server):
    storage = Memory()
    state: dict = {}

    async def redirect_handler(url: str) -> None:
        done = await consent(server.base, url)
        assert done.status_code == 302
        query = parse_qs(urlparse(done.headers["location"]).query)
        state["result"] = AuthorizationCodeResult(code=query["code"][0], state=query.get("state", [None])[0])

    async def callback_handler() -> AuthorizationCodeResult:
        return state["result"]

    provider = OAuthClientProvider(server.url, OAuthClientMetadata(
        client_name="sdk-test", redirect_uris=[REDIRECT], grant_types=["authorization_code", "refresh_token"]),
        storage, redirect_handler=redirect_handler, callback_handler=callback_handler)

    async def go(client):
        listed = await client.list_tools()
        whoami = await client.call_tool("whoami", {})
        denied = await client.call_tool("recall", {"query": "anything"})
        return listed, whoami, denied

    listed, whoami, denied = anyio.run(mcp_session, server.url, None, go, provider)
    assert len(listed.tools) > 80 and not whoami.is_error
    # DCR gave client-generic: deny by default.
    assert denied.is_error and "FORBIDDEN: profile client-generic" in text(denied) and "client-generic" in text(denied)
    client_id = storage.client.client_id
    assert client_id.startswith("vp_client_")
    listed_clients = server.master("GET", "/admin/oauth/clients").json()["items"]
    assert [c["scopeProfile"] for c in listed_clients if c["clientId"] == client_id] == ["client-generic"]

    # Refresh through the SDK provider itself: mark its access token expired, call again.
    old = storage.tokens
    provider.context.token_expiry_time = time.time() - 1
    again = anyio.run(mcp_session, server.url, None, lambda c: c.call_tool("whoami", {}), provider)
    assert not again.is_error
    new = storage.tokens
    assert new.refresh_token != old.refresh_token and new.access_token != old.access_token
    # The rotated (old) refresh token is refused, and presenting it revokes the whole grant.
    form = {"grant_type": "refresh_token", "refresh_token": old.refresh_token, "client_id": client_id,
            "client_secret": storage.client.client_secret}
    replay = server.http("POST", "/oauth/token", data=form)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    r = server.http("POST", "/mcp", headers={"Authorization": f"Bearer {new.access_token}"}, json={})
    assert r.status_code == 401, "a replayed refresh token revokes its whole grant"
    assert server.http("POST", "/oauth/token", data={**form, "refresh_token": new.refresh_token}).status_code == 400

    # Revoke (RFC 7009) a fresh grant's access token: it stops working at once.
    verifier, challenge = pkce()
    client = {"client_id": client_id, "client_secret": storage.client.client_secret}
    tokens = exchange(server, client, authorize_code(server, client, challenge), verifier).json()
    assert server.http("POST", "/mcp", headers={"Authorization": f"Bearer {tokens['access_token']}"},
                       json={}).status_code != 401
    revoked = server.http("POST", "/oauth/revoke", data={"token": tokens["access_token"], "client_id": client_id,
                                                         "client_secret": client["client_secret"]})
    assert revoked.status_code == 200
    assert server.http("POST", "/mcp", headers={"Authorization": f"Bearer {tokens['access_token']}"},
                       json={}).status_code == 401
    again = server.http("POST", "/oauth/token", data={**form, "refresh_token": tokens["refresh_token"]})
    assert again.status_code == 400, "revoking the access token revokes its refresh token too"


def test_dcr_refusals(server):
    for profile_field in ("scope_profile", "scopeProfile"):
        r = server.http("POST", "/oauth/register", json={"client_name": "evil", "redirect_uris": [REDIRECT],
                                                         profile_field: "master"})
        assert r.status_code == 400 and "ScopeViolation" in r.json()["error_description"]
    assert server.http("POST", "/oauth/register", content=b"not json").status_code == 400
    assert server.http("POST", "/oauth/register", json={"client_name": "x"}).status_code == 400  # no redirect_uris
    bad = server.http("POST", "/oauth/register", json={"redirect_uris": [REDIRECT], "grant_types": ["password"]})
    assert bad.status_code == 400
    ok = register(server, grant_types=["client_credentials"], token_endpoint_auth_method="client_secret_post")
    assert ok["scope_profile"] == "client-generic" and len(ok["client_secret"]) == 64
    assert ok["token_endpoint"] == f"{server.base}/oauth/token"
    token = client_credentials_token(server, ok["client_id"], ok["client_secret"])
    assert len(token) == 64


def test_authorization_code_refusals_pkce_redirect_and_reuse(server):
    client = register(server)
    verifier, challenge = pkce()
    # Without S256 (plain PKCE) the SDK's authorize handler refuses.
    plain = server.http("GET", f"/oauth/authorize?response_type=code&client_id={client['client_id']}"
                               f"&redirect_uri={REDIRECT}&code_challenge={challenge}&code_challenge_method=plain")
    assert plain.status_code in (302, 400) and "code=" not in plain.headers.get("location", "")
    # An unregistered redirect_uri never reaches the consent page.
    evil = server.http("GET", f"/oauth/authorize?response_type=code&client_id={client['client_id']}"
                              f"&redirect_uri=http://evil.example/cb&code_challenge={challenge}")
    assert evil.status_code == 400
    code = authorize_code(server, client, challenge)
    wrong = exchange(server, client, code, pkce()[0])
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    moved = exchange(server, client, code, verifier, redirect="http://127.0.0.1:9/other")
    assert moved.status_code == 400
    good = exchange(server, client, code, verifier)
    assert good.status_code == 200, good.text
    reuse = exchange(server, client, code, verifier)
    assert reuse.status_code == 400 and reuse.json()["error"] == "invalid_grant"
    r = server.http("POST", "/mcp", headers={"Authorization": f"Bearer {good.json()['access_token']}"}, json={})
    assert r.status_code == 401, "replaying a code revokes the tokens it granted"
    # Wrong client secret, unknown client.
    code2 = authorize_code(server, client, challenge)
    assert exchange(server, {**client, "client_secret": "0" * 64}, code2, verifier).status_code == 401
    assert exchange(server, {**client, "client_id": "vp_client_nope"}, code2, verifier).status_code == 401


def test_consent_deny_and_csrf(server):
    client = register(server)
    _, challenge = pkce()
    url = (f"{server.base}/oauth/authorize?response_type=code&client_id={client['client_id']}"
           f"&redirect_uri={REDIRECT}&code_challenge={challenge}&state=zz")
    denied = anyio.run(consent, server.base, url, "deny")
    assert denied.status_code == 302
    assert parse_qs(urlparse(denied.headers["location"]).query)["error"] == ["access_denied"]

    async def forged() -> list[int]:
        async with httpx2.AsyncClient(timeout=30) as browser:
            first = await browser.get(url)
            page = await browser.get(first.headers["location"])
            rid = re.search(r'name="request" value="([^"]+)"', page.text).group(1)
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
            out = []
            # A cross-site form post carries no cookie: refused.
            async with httpx2.AsyncClient(timeout=30) as attacker:
                out.append((await attacker.post(f"{server.base}/oauth/consent",
                                                data={"request": rid, "csrf": csrf, "action": "approve"})).status_code)
            out.append((await browser.post(f"{server.base}/oauth/consent",
                                           data={"request": rid, "csrf": "0" * 64, "action": "approve"})).status_code)
            ok = await browser.post(f"{server.base}/oauth/consent", data={"request": rid, "csrf": csrf,
                                                                         "action": "approve"})
            out.append(ok.status_code)
            # Decided once: the same form cannot mint a second code.
            browser.cookies.set("vp_consent", csrf, path="/oauth/consent")
            out.append((await browser.post(f"{server.base}/oauth/consent",
                                           data={"request": rid, "csrf": csrf, "action": "approve"})).status_code)
            return out

    assert anyio.run(forged) == [403, 403, 302, 403]


def test_client_credentials_with_the_sdk_provider_and_admin_revocation(server):
    made = make_client(server, "public-readonly", name="ci-bot")
    provider = ClientCredentialsOAuthProvider(server.url, Memory(), made["client_id"], made["client_secret"],
                                              token_endpoint_auth_method="client_secret_post", issuer=server.base)

    async def go(client):
        return await client.call_tool("list_memories", {"namespace": "global"})

    result = anyio.run(mcp_session, server.url, None, go, provider)
    assert not result.is_error
    token = client_credentials_token(server, made["client_id"], made["client_secret"])
    second = client_credentials_token(server, made["client_id"], made["client_secret"])
    gone = server.master("DELETE", f"/admin/oauth/clients/{made['client_id']}").json()
    assert gone == {"revokedClient": True, "revokedTokens": 3, "revokedRefresh": 0}
    for t in (token, second):
        assert server.http("POST", "/mcp", headers={"Authorization": f"Bearer {t}"}, json={}).status_code == 401
    r = server.http("POST", "/oauth/token", data={"grant_type": "client_credentials", "client_id": made["client_id"],
                                                 "client_secret": made["client_secret"]})
    assert r.status_code == 401
    assert server.master("DELETE", f"/admin/oauth/clients/{made['client_id']}").status_code == 404


def test_expired_access_token_is_refused(server):
    made = make_client(server, "public-readonly")
    token = client_credentials_token(server, made["client_id"], made["client_secret"])
    assert server.http("POST", "/mcp", headers={"Authorization": f"Bearer {token}"}, json={}).status_code != 401
    conn = apsw.Connection(str(server.db))
    conn.set_busy_timeout(10_000)
    conn.execute("UPDATE oauth_access_tokens SET expiresAt = ? WHERE tokenHash = ?",
                 (int(time.time() * 1000) - 1, sha(token)))
    conn.close()
    assert server.http("POST", "/mcp", headers={"Authorization": f"Bearer {token}"}, json={}).status_code == 401


def test_admin_routes_need_the_master_bearer(server):
    made = make_client(server, "public-readonly")
    token = client_credentials_token(server, made["client_id"], made["client_secret"])
    assert server.http("GET", "/admin/oauth/clients").status_code == 401
    for method, path in (("GET", "/admin/oauth/clients"), ("POST", "/admin/oauth/seed-profiles"),
                         ("DELETE", f"/admin/oauth/clients/{made['client_id']}")):
        r = server.http(method, path, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 403 and r.json()["error_description"].startswith("FORBIDDEN:")
    seeded = server.master("POST", "/admin/oauth/seed-profiles").json()
    assert {"master", "client-generic", "public-readonly", "project-example"} <= set(seeded["profiles"])
    # only generic examples: no customer's or person's profile ships with the server
    assert not any("marie" in p or "iris" in p for p in seeded["profiles"])
    assert server.master("POST", "/admin/oauth/seed-profiles").json()["seeded"] == []
    assert server.master("POST", "/admin/oauth/clients", json={"name": "x", "scopeProfile": "master"}).status_code == 400
    assert server.master("POST", "/admin/oauth/clients", json={"name": "x", "scopeProfile": "nope"}).status_code == 404
    many = [make_client(server, "client-generic", name=f"n{i}")["client_id"] for i in range(5)]
    listed = {c["clientId"] for c in server.master("GET", "/admin/oauth/clients").json()["items"]}
    assert set(many) <= listed


def test_the_database_holds_no_raw_secret(server):
    made = make_client(server, "public-readonly", name="scan")
    dcr = register(server)
    verifier, challenge = pkce()
    code = authorize_code(server, dcr, challenge)
    pair = exchange(server, dcr, code, verifier).json()
    cc = client_credentials_token(server, made["client_id"], made["client_secret"])
    secrets_issued = [made["client_secret"], dcr["client_secret"], code, pair["access_token"],
                      pair["refresh_token"], cc, MASTER]
    conn = apsw.Connection(str(server.db))
    conn.set_busy_timeout(10_000)
    conn.execute("PRAGMA wal_checkpoint(FULL)").fetchall()
    dump = []
    for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
        for row in conn.execute(f'SELECT * FROM "{table}"'):
            dump.append(" ".join(str(v) for v in row))
    conn.close()
    blob = "\n".join(dump)
    raw = b"".join(p.read_bytes() for p in server.db.parent.glob(server.db.name + "*"))
    for value in secrets_issued:
        assert value not in blob and value.encode() not in raw
    assert sha(pair["access_token"]) in blob and sha(made["client_secret"]) in blob


def test_clerk_exchange_without_an_issuer_domain_is_a_500(server):
    r = server.http("POST", "/issueBearerFromClerk", json={"clerkJwt": "x.y.z", "extId": "e"})
    assert r.status_code == 500 and r.json() == {"error": "Server misconfigured: CLERK_JWT_ISSUER_DOMAIN not set"}
