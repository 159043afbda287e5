"""`POST /issueBearerFromClerk` against a locally generated RSA key served by a loopback JWKS server."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import apsw
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from support.http_helpers import MASTER, serving, text

EXT = "mhfnnhkmnclmnnllhmoidkflgpkogjpe"


def rsa_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def clerk(tmp_path_factory):
    key = rsa_key()
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwks = json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()

    class JWKS(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            ok = self.path == "/.well-known/jwks.json"
            self.send_response(200 if ok else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            if ok:
                self.wfile.write(jwks)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), JWKS)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    issuer = f"http://127.0.0.1:{httpd.server_address[1]}"
    env = {"CLERK_JWT_ISSUER_DOMAIN": issuer, "VP_ALLOWED_EXT_IDS": f"other, {EXT}"}
    with serving(tmp_path_factory.mktemp("clerk") / "vp.db", env=env) as server:
        def token(sub="user_2abc", *, signer=key, iss=issuer, exp=600, alg="RS256", **claims):
            payload = {"sub": sub, "iss": iss, "exp": int(time.time()) + exp, "iat": int(time.time()), **claims}
            secret = signer if alg == "RS256" else "shared-secret-of-at-least-32-bytes!!"
            return jwt.encode(payload, secret, algorithm=alg, headers={"kid": "k1"})

        yield server, token
    httpd.shutdown()


def issue(server, body):
    return server.http("POST", "/issueBearerFromClerk", json=body,
                       headers={"User-Agent": "ext/1.2", "X-Forwarded-For": "203.0.113.9, 10.0.0.1"})


def test_errors_have_the_documented_status_and_message(clerk):
    server, token = clerk
    cases = [
        ({"extId": EXT}, 400, "Missing required field: clerkJwt"),
        ({"clerkJwt": token()}, 400, "Missing required field: extId"),
        ({"clerkJwt": "not.a.jwt", "extId": EXT}, 401, "Invalid Clerk JWT"),
        ({"clerkJwt": token(signer=rsa_key()), "extId": EXT}, 401, "Invalid Clerk JWT"),  # wrong signature
        ({"clerkJwt": token(exp=-60), "extId": EXT}, 401, "Invalid Clerk JWT"),  # expired
        ({"clerkJwt": token(iss="https://evil.example"), "extId": EXT}, 401, "Invalid Clerk JWT"),
        ({"clerkJwt": token(alg="HS256"), "extId": EXT}, 401, "Invalid Clerk JWT"),  # algorithm confusion
        ({"clerkJwt": token(), "extId": "ext_unknown"}, 403, "Extension not authorized"),
    ]
    for body, status, message in cases:
        r = issue(server, body)
        assert (r.status_code, r.json()["error"]) == (status, message), body


def test_bearer_is_issued_hashed_audited_and_scoped_to_the_workspace(clerk):
    server, token = clerk
    r = issue(server, {"clerkJwt": token("user_cedric", email="cedric@example.com"), "extId": EXT,
                       "extVersion": "1.2.0"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["workspaceId"] == "user_cedric" and body["userName"] == body["workspaceName"] == "cedric"
    assert len(body["bearer"]) == 64 and int(body["bearer"], 16) >= 0
    assert abs(body["expiresAt"] - (time.time() * 1000 + 7 * 24 * 3600 * 1000)) < 120_000
    conn = apsw.Connection(str(server.db))
    conn.set_busy_timeout(10_000)
    audit = conn.execute("SELECT clerkUserId, workspaceId, extId, extVersion, ip, userAgent FROM credentialsAuditLog "
                         "WHERE clerkUserId = 'user_cedric'").fetchall()
    stored = conn.execute("SELECT tokenHash FROM userBearerTokens WHERE clerkUserId = 'user_cedric'").fetchall()
    conn.close()
    assert audit == [("user_cedric", "user_cedric", EXT, "1.2.0", "203.0.113.9", "ext/1.2")]
    assert len(stored) == 1 and stored[0][0] != body["bearer"] and len(stored[0][0]) == 64

    async def use(client):
        own = await client.call_tool("store_memory", {"namespace": "workspace/user_cedric/notes", "type": "note",
                                                      "content": "mine"})
        other = await client.call_tool("store_memory", {"namespace": "workspace/user_other", "type": "note",
                                                        "content": "theirs", "createdBy": "user_cedric"})
        sent = await client.call_tool("send_message", {"channel": "pi", "content": "hello"})
        return own, other, sent

    own, other, sent = server.mcp(body["bearer"], use)
    assert not own.is_error and not sent.is_error
    assert other.is_error and "FORBIDDEN" in text(other) and "clerk-user" in text(other)
    # Revoked (the documented V0.0.2 way: flag the row) = refused.
    conn = apsw.Connection(str(server.db))
    conn.set_busy_timeout(10_000)
    conn.execute("UPDATE userBearerTokens SET revoked = 1 WHERE clerkUserId = 'user_cedric'")
    conn.close()
    assert server.http("POST", "/mcp", headers={"Authorization": f"Bearer {body['bearer']}"}, json={}).status_code == 401


def test_five_a_minute_per_user_then_429_with_retry_after(clerk):
    server, token = clerk
    codes = [issue(server, {"clerkJwt": token("user_burst"), "extId": EXT}).status_code for _ in range(5)]
    assert codes == [200] * 5
    limited = issue(server, {"clerkJwt": token("user_burst"), "extId": EXT})
    assert limited.status_code == 429 and limited.headers["retry-after"] == "60"
    assert limited.json()["error"] == "Rate limit exceeded. Try again in 1 minute."
    # Per user: another user is not limited.
    assert issue(server, {"clerkJwt": token("user_calm"), "extId": EXT}).status_code == 200
    assert server.master("GET", "/health").status_code == 200 and MASTER
