"""The OAuth, scope-profile, CIMD and Clerk-bearer stores under `vantage_peers/http/`, driven in-process
through the provider on both backends (the HTTP flows over a real `serve` are in test_http_*.py).

Single use is the point: a code, a refresh token and a client revocation are decided by conditional
UPDATEs, so threads racing on one secret (each its own connection and transaction) get one winner.
"""

from __future__ import annotations

import json
import threading
from urllib.parse import parse_qs, urlsplit

import anyio
import pytest
from mcp.server.auth.provider import AuthorizationParams, TokenError
from mcp.shared.auth import OAuthClientInformationFull

from vantage_peers.core.errors import InvalidArgument, NotFound, VantageError
from vantage_peers.core.ids import now_ms
from vantage_peers.core.scopes import ScopeProfile
from vantage_peers.http import profiles, store
from vantage_peers.http.cimd_store import upsert_cimd_client
from vantage_peers.http.provider import SqliteOAuthProvider, VantageTokenVerifier, clerk_principal
from vantage_peers.http.tokens import digest, new_secret

pytestmark = pytest.mark.backends

REDIRECT = "http://127.0.0.1:9/callback"


@pytest.fixture
def provider(db):
    return SqliteOAuthProvider(db, base_url="http://127.0.0.1:9", access_ttl_s=3600, refresh_ttl_s=86400)


def client_info(client_id: str = "vp_client_test", **extra) -> OAuthClientInformationFull:
    return OAuthClientInformationFull.model_validate({
        "client_id": client_id, "client_secret": "s3cret", "client_name": "Test 🙂 client",
        "redirect_uris": [REDIRECT], "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "client_secret_post", "scope": "mcp:full", **extra})


def approved_code(provider, db, client) -> str:
    """authorize -> the consent page approves -> the code in the redirect."""
    params = AuthorizationParams(state="st", scopes=["mcp:full"], code_challenge="x" * 43,
                                 redirect_uri=REDIRECT, redirect_uri_provided_explicitly=True, resource=None)
    url = anyio.run(provider.authorize, client, params)
    request_id = parse_qs(urlsplit(url).query)["request"][0]

    def approve(conn):
        row = store.get_request(conn, digest(request_id), now=now_ms())
        assert row is not None and store.decide_request(conn, row["requestHash"], now=now_ms())
        assert not store.decide_request(conn, row["requestHash"], now=now_ms())  # decided once
        return provider.approve_sync(conn, row)

    redirect = db.write(approve)
    query = parse_qs(urlsplit(redirect).query)
    assert query["state"] == ["st"]
    return query["code"][0]


def race(n: int, fn) -> list:
    """`fn()` in n threads released together; their results (an exception counts as a result)."""
    gate, out, lock = threading.Barrier(n), [], threading.Lock()

    def run():
        gate.wait()
        try:
            got = fn()
        except Exception as exc:  # noqa: BLE001 - the race's losers are part of what is checked
            got = exc
        with lock:
            out.append(got)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def test_default_profiles_seed_once_and_an_operator_profile_round_trips(db):
    seeded = db.write(profiles.seed_defaults)
    assert set(seeded) == {p.profile_id for p in profiles.DEFAULT_PROFILES}
    assert db.write(profiles.seed_defaults) == []
    custom = ScopeProfile("team-x", "Team X: 'quotes' and 日本語", ("alice", "bob"), ("project/x/",), ("project/x/",))
    assert db.write(lambda c: profiles.upsert(c, custom)) is True
    changed = ScopeProfile("team-x", "narrower", ("alice",), ("project/x/",), ())
    db.write(lambda c: profiles.upsert(c, changed))
    assert db.read(lambda c: profiles.get(c, "team-x")) == changed
    assert changed.record_read == "own"  # the default (#32): its own messages and tasks
    widened = profiles.from_doc({**changed.doc(), "recordReadScope": "team"})
    db.write(lambda c: profiles.upsert(c, widened))
    assert db.read(lambda c: profiles.get(c, "team-x")).record_read == "team"
    with pytest.raises(InvalidArgument, match="recordReadScope"):
        profiles.from_doc({**changed.doc(), "recordReadScope": "team/*"})
    names = [p.profile_id for p in db.read(profiles.list_all)]
    assert names == sorted(names) and names.count("team-x") == 1 and profiles.CLIENT_GENERIC in names
    with pytest.raises(NotFound):
        db.read(lambda c: profiles.require(c, "'; DROP TABLE oauth_clients; --"))


def test_client_lifecycle_and_listing(provider, db):
    db.write(profiles.seed_defaults)
    for i in range(7):
        db.write(lambda c, i=i: provider.create_client_sync(c, client_info(f"vp_client_{i}"),
                                                             profiles.CLIENT_GENERIC, "admin"))
    with pytest.raises(VantageError, match="SCOPE_VIOLATION"):
        db.write(lambda c: provider.create_client_sync(c, client_info("vp_client_m"), profiles.MASTER, "admin"))
    got = anyio.run(provider.get_client, "vp_client_3")
    assert got.client_name == "Test 🙂 client" and [str(u) for u in got.redirect_uris] == [REDIRECT]
    assert got.client_secret == digest("s3cret")  # only the hash is stored
    anyio.run(provider.exchange_client_credentials, got, ["mcp:full"], None)
    listed = db.read(lambda c: store.list_clients(c, now=now_ms()))
    assert [x["clientId"] for x in listed] == [f"vp_client_{i}" for i in range(7)]
    assert {x["clientId"]: x["activeAccessTokens"] for x in listed}["vp_client_3"] == 1
    db.write(lambda c: store.set_client_profile(c, "vp_client_3", profiles.PUBLIC_READONLY))
    assert db.read(lambda c: store.get_client(c, "vp_client_3"))["scopeProfile"] == profiles.PUBLIC_READONLY
    revoked = db.write(lambda c: store.revoke_client(c, "vp_client_3", now=now_ms()))
    assert revoked == {"revokedClient": True, "revokedTokens": 1, "revokedRefresh": 0}
    with pytest.raises(NotFound):
        db.write(lambda c: store.revoke_client(c, "vp_client_3", now=now_ms()))
    assert anyio.run(provider.get_client, "vp_client_3") is None
    assert len(db.read(lambda c: store.list_clients(c, now=now_ms()))) == 6
    assert len(db.read(lambda c: store.list_clients(c, now=now_ms(), include_revoked=True))) == 7


def test_code_flow_refresh_rotation_and_replay_revokes_the_grant(provider, db):
    anyio.run(provider.register_client, client_info())
    client = anyio.run(provider.get_client, "vp_client_test")
    code = approved_code(provider, db, client)
    loaded = anyio.run(provider.load_authorization_code, client, code)
    assert loaded is not None and loaded.scopes == ["mcp:full"]
    tokens = anyio.run(provider.exchange_authorization_code, client, loaded)
    verifier = VantageTokenVerifier(db, master_secret=None)
    principal = anyio.run(verifier.verify_token, tokens.access_token)
    assert principal is not None and principal.client_id == "vp_client_test"
    assert principal.profile.profile_id == profiles.CLIENT_GENERIC
    with pytest.raises(TokenError):
        anyio.run(provider.exchange_authorization_code, client, loaded)  # single use
    assert anyio.run(provider.load_authorization_code, client, code) is None  # replay: the grant is revoked
    assert anyio.run(verifier.verify_token, tokens.access_token) is None

    code = approved_code(provider, db, client)
    tokens = anyio.run(provider.exchange_authorization_code, client,
                       anyio.run(provider.load_authorization_code, client, code))
    old = anyio.run(provider.load_refresh_token, client, tokens.refresh_token)
    fresh = anyio.run(provider.exchange_refresh_token, client, old, ["mcp:full"])
    assert anyio.run(verifier.verify_token, fresh.access_token) is not None
    assert anyio.run(provider.load_refresh_token, client, tokens.refresh_token) is None  # rotated: replay
    assert anyio.run(verifier.verify_token, fresh.access_token) is None  # ... revoked the whole family
    other = client_info("vp_client_other")
    anyio.run(provider.register_client, other)
    assert anyio.run(provider.load_refresh_token, anyio.run(provider.get_client, "vp_client_other"),
                     fresh.refresh_token) is None


def test_racing_threads_get_one_token_per_code_and_one_rotation_per_refresh(provider, db):
    anyio.run(provider.register_client, client_info())
    client = anyio.run(provider.get_client, "vp_client_test")
    loaded = anyio.run(provider.load_authorization_code, client, approved_code(provider, db, client))
    results = race(6, lambda: anyio.run(provider.exchange_authorization_code, client, loaded))
    won = [r for r in results if not isinstance(r, Exception)]
    assert len(won) == 1 and all(isinstance(r, TokenError) for r in results if r not in won), results
    assert db.read(lambda c: c.scalar("SELECT count(*) FROM oauth_access_tokens")) == 1
    refresh = anyio.run(provider.load_refresh_token, client, won[0].refresh_token)
    results = race(6, lambda: anyio.run(provider.exchange_refresh_token, client, refresh, ["mcp:full"]))
    assert len([r for r in results if not isinstance(r, Exception)]) == 1, results
    assert db.read(lambda c: c.scalar("SELECT count(*) FROM oauth_refresh_tokens WHERE rotatedAt IS NOT NULL")) == 1


def test_clerk_bearers_are_found_by_hash_and_expire(db):
    bearer, now = new_secret(), now_ms()

    def issue(conn, token, expires):
        conn.execute("INSERT INTO userBearerTokens (tokenHash, clerkUserId, workspaceId, userName, extId, "
                     "expiresAt, createdAt) VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (digest(token), "user_1", "user_1", "Ann", "ext", expires, now))
        conn.execute("INSERT INTO credentialsAuditLog (clerkUserId, workspaceId, extId, extVersion, issuedAt, "
                     "ip, userAgent) VALUES (?, ?, ?, ?, ?, ?, ?)", ("user_1", "user_1", "ext", None, now, None, None))

    db.write(lambda c: issue(c, bearer, now + 60_000))
    db.write(lambda c: issue(c, "expired-token", now - 1))
    found = db.read(lambda c: clerk_principal(c, bearer))
    assert found is not None and found.subject == "user_1" and found.kind == "clerk"
    assert db.read(lambda c: clerk_principal(c, "expired-token")) is None
    assert db.read(lambda c: clerk_principal(c, bearer + "x")) is None
    assert db.read(lambda c: store.issued_recently(c, "user_1", now=now + 1)) == 2
    assert db.read(lambda c: store.issued_recently(c, "user_1", now=now + 120_000)) == 0


def test_cimd_upsert_refreshes_a_document_client_but_never_a_revoked_or_registered_one(db):
    class Doc:  # what cimd.DocumentCache.resolve returns: the fields the store reads
        client_id = "https://app.example/oauth/client.json"
        client_name = "Doc client"
        redirect_uris = (REDIRECT,)
        grant_types = ("authorization_code",)
        raw = {"client_uri": "https://app.example", "ignored": "x"}

    db.write(lambda c: upsert_cimd_client(c, Doc, now=now_ms()))
    row = db.read(lambda c: store.get_client(c, Doc.client_id))
    assert row["registeredVia"] == "cimd" and json.loads(row["metadata"]) == {"client_uri": "https://app.example"}
    Doc.client_name = "Renamed"
    db.write(lambda c: upsert_cimd_client(c, Doc, now=now_ms()))
    assert db.read(lambda c: store.get_client(c, Doc.client_id))["name"] == "Renamed"
    db.write(lambda c: store.revoke_client(c, Doc.client_id, now=now_ms()))
    Doc.client_name = "Back again"
    db.write(lambda c: upsert_cimd_client(c, Doc, now=now_ms()))
    assert db.read(lambda c: store.get_client(c, Doc.client_id)) is None  # a revocation sticks


def test_token_cli_manages_clients_and_profiles_on_the_configured_database(settings, db, monkeypatch, capsys):
    """`vantage-peers token …` in-process, on whichever database the environment names."""
    from vantage_peers.cli import main

    monkeypatch.setenv("VP_DB_PATH", str(settings.db_path))
    if settings.database_url:
        monkeypatch.setenv("VP_DATABASE_URL", settings.database_url)
    else:
        monkeypatch.delenv("VP_DATABASE_URL", raising=False)

    def run(*args: str):
        assert main(["token", *args]) == 0
        return json.loads(capsys.readouterr().out)

    assert set(run("profile", "seed")["seeded"]) == {p.profile_id for p in profiles.DEFAULT_PROFILES}
    run("profile", "set", "cedar-agent", "--from", "cedar", "--read", "project/cedar/", "--write", "project/cedar/")
    assert run("profile", "show", "cedar-agent")["namespaceReadPrefixes"] == ["project/cedar/"]
    created = [run("create", "--name", f"bot {i}", "--profile", "cedar-agent", "--grant", "client_credentials")
               for i in range(3)]
    assert [c["clientId"] for c in run("list")] == [c["client_id"] for c in created]
    assert db.read(lambda c: store.get_client(c, created[0]["client_id"]))["clientSecretHash"] == \
        digest(created[0]["client_secret"])
    run("set-profile", created[1]["client_id"], profiles.PUBLIC_READONLY)
    assert run("revoke", created[0]["client_id"])["revokedClient"] is True
    listed = run("list")
    assert [(c["clientId"], c["scopeProfile"]) for c in listed] == [(created[1]["client_id"], profiles.PUBLIC_READONLY),
                                                                     (created[2]["client_id"], "cedar-agent")]
