"""Rate limits shared through the database by several `serve` processes, client addresses taken from
trusted proxies only, and CIMD document fetches limited like registrations (issue #31)."""

from __future__ import annotations

import time
from urllib.parse import urlencode

import pytest
from support.http_helpers import REDIRECT, Docs, Serve, make_client, serving

from vantage_peers.http.proxies import client_address, forwarded_proto, parse_trusted
from vantage_peers.http.shared_limits import Bucket, LimitStore, bucket

PER_MINUTE = 5  # burst 5, then one more every 12 s


def register(server: Serve, headers: dict[str, str] | None = None):
    return server.http("POST", "/oauth/register", headers=headers or {},
                       json={"client_name": "t", "redirect_uris": [REDIRECT]})


@pytest.mark.slow  # two serve processes
@pytest.mark.backends
def test_two_replicas_of_two_workers_spend_one_registration_budget(tmp_path, database_url):
    db = tmp_path / "shared.db"
    env = {"VP_OAUTH_REGISTER_PER_MINUTE": str(PER_MINUTE), **({"VP_DATABASE_URL": database_url} if database_url else {})}
    # two replicas of two worker processes each: four processes, one budget
    with serving(db, env=env, args=["--workers", "2"]) as a, serving(db, env=env, args=["--workers", "2"]) as b:
        started = time.monotonic()
        codes = [register(server).status_code for _ in range(8) for server in (a, b)]
        elapsed = time.monotonic() - started
    accepted = codes.count(201)
    assert set(codes) == {201, 429}, codes
    # the burst once across all four processes (in memory it was four times), plus what refilled meanwhile
    assert PER_MINUTE <= accepted <= PER_MINUTE + int(elapsed * PER_MINUTE / 60), (codes, elapsed)
    assert codes[:PER_MINUTE] == [201] * PER_MINUTE


@pytest.mark.slow  # two serve processes and a lock-out
def test_failed_logins_on_two_processes_share_one_backoff(tmp_path):
    db = tmp_path / "backoff.db"
    with serving(db) as a, serving(db) as b:
        made = make_client(a, "client-generic", grantTypes=["client_credentials"])
        statuses = []
        for i in range(16):
            server = (a, b)[i % 2]
            r = server.http("POST", "/oauth/token", data={"grant_type": "client_credentials",
                                                          "client_id": made["client_id"], "client_secret": f"bad{i}"})
            statuses.append(r.status_code)
            if r.status_code == 429:
                assert "failed client authentications" in r.json()["error_description"]
                break
    # 5 free failures in all, then the lock-out — per process it took 6 on each (12 requests)
    assert statuses[-1] == 429 and len(statuses) <= 7, statuses


def test_a_spoofed_forwarded_for_from_an_untrusted_peer_is_ignored(tmp_path):
    with serving(tmp_path / "spoof.db", env={"VP_OAUTH_REGISTER_PER_MINUTE": "3"}) as server:
        codes = [register(server, {"X-Forwarded-For": f"198.51.100.{i}"}).status_code for i in range(3)]
        assert codes == [201, 201, 201]
        # loopback is not trusted by default: a new address in the header is still the same client
        assert register(server, {"X-Forwarded-For": "203.0.113.77"}).status_code == 429
        assert register(server, {"Forwarded": "for=203.0.113.78"}).status_code == 429


def test_a_trusted_proxy_is_believed_about_its_client(tmp_path):
    env = {"VP_OAUTH_REGISTER_PER_MINUTE": "2", "VP_TRUSTED_PROXIES": "127.0.0.1, 10.0.0.0/8"}
    with serving(tmp_path / "proxy.db", env=env) as server:
        one = {"X-Forwarded-For": "198.51.100.1"}
        assert [register(server, one).status_code for _ in range(3)] == [201, 201, 429]
        # what the client wrote to the left of the proxy's own entry is ignored
        spoof = {"X-Forwarded-For": "192.0.2.200, 198.51.100.1"}
        assert register(server, spoof).status_code == 429
        assert register(server, {"X-Forwarded-For": "198.51.100.2"}).status_code == 201  # another client
        assert register(server, {"Forwarded": 'for="198.51.100.3:4711"'}).status_code == 201


def test_cimd_document_fetches_are_limited_like_registrations(tmp_path):
    docs = Docs()
    try:
        url = docs.document("/limited.json", cache="no-store")  # never cached: every authorize fetches
        env = {"VP_CIMD_TEST_LOOPBACK": "1", "VP_OAUTH_REGISTER_PER_MINUTE": "3"}
        with serving(tmp_path / "cimd.db", env=env) as server:
            query = urlencode({"client_id": url, "redirect_uri": REDIRECT, "response_type": "code",
                               "code_challenge": "x" * 43, "code_challenge_method": "S256", "state": "s"})
            codes = [server.http("GET", f"/oauth/authorize?{query}").status_code for _ in range(5)]
            metrics = server.http("GET", "/metrics").text
    finally:
        docs.httpd.shutdown()
    assert codes[3:] == [429, 429] and 429 not in codes[:3], codes
    assert docs.hits["/limited.json"] == 3  # the refused requests fetched nothing
    assert 'vp_http_rate_limited_total{endpoint="authorize"} 2.0' in metrics


def test_client_address_rules_unit():
    trusted = parse_trusted("10.0.0.0/8, 127.0.0.1, ::1")
    xff = {b"x-forwarded-for": b"1.2.3.4, 10.1.1.1"}
    assert client_address("127.0.0.1", xff, ()) == "127.0.0.1"  # no proxies trusted: the peer
    assert client_address("192.0.2.9", xff, trusted) == "192.0.2.9"  # an untrusted peer's header ignored
    assert client_address("127.0.0.1", xff, trusted) == "1.2.3.4"  # trusted hops skipped from the right
    assert client_address("127.0.0.1", {b"x-forwarded-for": b"6.6.6.6, 5.5.5.5"}, trusted) == "5.5.5.5"
    assert client_address("::1", {b"forwarded": b'for="[2001:db8::1]:80";proto=https'}, trusted) == "2001:db8::1"
    assert client_address("127.0.0.1", {b"x-forwarded-for": b"garbage"}, trusted) == "127.0.0.1"
    assert forwarded_proto({b"x-forwarded-proto": b"https"}) == "https"
    assert forwarded_proto({b"forwarded": b"for=1.2.3.4;proto=https"}) == "https"
    assert forwarded_proto({b"x-forwarded-proto": b"gopher"}) is None and forwarded_proto({}) is None
    with pytest.raises(ValueError, match="VP_TRUSTED_PROXIES"):
        parse_trusted("10.0.0.0/8, proxy.example")


@pytest.mark.backends
def test_limit_store_buckets_and_backoff(db):
    store = LimitStore(db, free=2, max_seconds=8)
    b = [bucket("t", 60, what="tests")]  # 1 a second, burst 60 -> take the burst down first
    two = [Bucket("t2", 60, 2.0, what="tests")]
    assert store.admit("a", two, now=0.0) is None and store.admit("a", two, now=0.0) is None
    wait, what = store.admit("a", two, now=0.0)
    assert wait == pytest.approx(1.0) and what == "tests"
    assert store.admit("b", two, now=0.0) is None  # another address has its own bucket
    assert store.admit("a", two, now=1.0) is None
    overall = [Bucket("o", 60, 1.0, per_address=False)]
    assert store.admit("x", overall, now=0.0) is None and store.admit("y", overall, now=0.0) is not None
    assert store.admit("a", b, now=0.0) is None
    for _ in range(2):
        store.failed("ip", now=0.0)
    assert store.locked("ip", now=0.0) is None
    store.failed("ip", now=0.0)
    assert store.locked("ip", now=0.0) == pytest.approx(1.0)
    assert store.admit("ip", b, backoff=True, now=0.0)[1] == "failed client authentications"
    for _ in range(10):
        store.failed("ip", now=0.0)
    assert store.locked("ip", now=0.0) == pytest.approx(8.0)
    store.succeeded("ip")
    assert store.locked("ip", now=0.0) is None


def test_client_address_middleware_rewrites_client_and_scheme_from_trusted_peers_only():
    import anyio

    from vantage_peers.http.proxies import ClientAddress

    seen = []

    async def app(scope, receive, send):
        seen.append((scope["client"][0], scope["scheme"]))

    middleware = ClientAddress(app, trusted=parse_trusted("127.0.0.1"))
    headers = [(b"x-forwarded-for", b"198.51.100.7"), (b"x-forwarded-proto", b"https")]
    for peer in ("127.0.0.1", "192.0.2.1"):
        anyio.run(middleware, {"type": "http", "client": (peer, 5000), "scheme": "http", "headers": headers},
                  None, None)
    assert seen == [("198.51.100.7", "https"), ("192.0.2.1", "http")]
