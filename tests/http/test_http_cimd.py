"""OAuth Client ID Metadata Documents against a real `vantage-peers serve`: the document served on
loopback under the test setting, the full authorization-code flow of a URL client_id, caching per
Cache-Control, and the refusals (private/link-local/loopback address, oversize, redirect, mismatched
client_id, mismatched redirect_uri, a secret in the document, plain http without the test setting)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import subprocess
from urllib.parse import parse_qs, quote, urlparse

import httpx2
import pytest
from support.http_helpers import REDIRECT, Docs, script, serving

from vantage_peers.http import cimd


@pytest.fixture(scope="module")
def docs():
    d = Docs()
    yield d
    d.httpd.shutdown()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("cimd") / "vp.db", env={"VP_CIMD_TEST_LOOPBACK": "1"}) as s:
        yield s


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    return verifier, base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")


def authorize(server, client_id: str, redirect: str = REDIRECT, challenge: str = "A" * 43) -> httpx2.Response:
    return server.http("GET", f"/oauth/authorize?response_type=code&client_id={quote(client_id, safe='')}"
                              f"&redirect_uri={quote(redirect, safe='')}&code_challenge={challenge}"
                              "&code_challenge_method=S256&state=st&scope=mcp:full")


def test_metadata_advertises_cimd_and_keeps_dcr(server):
    asm = server.http("GET", "/.well-known/oauth-authorization-server").json()
    assert asm["client_id_metadata_document_supported"] is True
    assert asm["registration_endpoint"] == f"{server.base}/oauth/register"
    r = server.http("POST", "/oauth/register", json={"client_name": "old client", "redirect_uris": [REDIRECT]})
    assert r.status_code == 201 and r.json()["client_id"].startswith("vp_client_")


def test_url_client_id_full_flow_and_cache(server, docs):
    client_id = docs.document("/clients/editor.json")
    verifier, challenge = pkce()
    with httpx2.Client(timeout=30) as browser:
        first = browser.get(authorize(server, client_id, challenge=challenge).request.url)
        assert first.status_code == 302 and "/oauth/consent" in first.headers["location"], first.headers
        page = browser.get(first.headers["location"])
        assert page.status_code == 200 and "CIMD client /clients/editor.json" in page.text
        assert "no access yet" in page.text and f"set-profile {client_id}" in page.text
        rid = re.search(r'name="request" value="([^"]+)"', page.text).group(1)
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
        done = browser.post(f"{server.base}/oauth/consent", data={"request": rid, "csrf": csrf, "action": "approve"},
                            follow_redirects=False)
    assert done.status_code == 302 and done.headers["location"].startswith(REDIRECT)
    code = parse_qs(urlparse(done.headers["location"]).query)["code"][0]
    # a public client: no secret, PKCE proves possession
    tokens = server.http("POST", "/oauth/token", data={
        "grant_type": "authorization_code", "code": code, "client_id": client_id, "redirect_uri": REDIRECT,
        "code_verifier": verifier})
    assert tokens.status_code == 200, tokens.text
    access = tokens.json()["access_token"]
    listed = server.http("POST", "/mcp", headers={"Authorization": f"Bearer {access}",
                                                  "Accept": "application/json, text/event-stream"},
                         json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert listed.status_code == 200, listed.text
    # cached per max-age=60: the consent flow and the token request fetched the document once
    assert docs.hits["/clients/editor.json"] == 1
    # the operator grants access by the URL client_id, as the consent page said
    env = {**os.environ, "VP_DB_PATH": str(server.db)}
    elevated = subprocess.run([script(), "token", "set-profile", client_id, "public-readonly"], env=env,
                              capture_output=True, text=True, timeout=60, check=False)
    assert elevated.returncode == 0, elevated.stderr
    clients = server.master("GET", "/admin/oauth/clients").json()["items"]
    row = next(c for c in clients if c["clientId"] == client_id)
    assert row["registeredVia"] == "cimd" and row["scopeProfile"] == "public-readonly"
    assert authorize(server, client_id).status_code == 302  # the profile survives a refresh of the document


def test_no_store_document_is_fetched_again(server, docs):
    client_id = docs.document("/clients/nostore.json", cache="no-store")
    assert authorize(server, client_id).status_code == 302
    first = docs.hits["/clients/nostore.json"]
    assert authorize(server, client_id).status_code == 302
    assert docs.hits["/clients/nostore.json"] > first


def test_redirect_uri_must_be_one_of_the_documents(server, docs):
    client_id = docs.document("/clients/strict.json")
    r = authorize(server, client_id, redirect="http://127.0.0.1:9/evil")
    assert r.status_code == 400 and "code=" not in r.headers.get("location", "")
    assert "redirect_uri" in r.text.lower() or "redirect" in r.json().get("error_description", "").lower()


def refused(server, client_id: str) -> str:
    r = authorize(server, client_id)
    assert r.status_code == 400, (client_id, r.status_code, r.text)
    body = r.json()
    assert body["error"] == "invalid_client" and body["error_description"].startswith("CIMD_REFUSED:"), body
    return body["error_description"]


def test_refusals(server, docs):
    # private, link-local, CGNAT and IPv6 local addresses: refused before any connection is made
    for url in ("https://10.1.2.3/client.json", "https://192.168.0.7/client.json",
                "https://169.254.169.254/latest/meta-data", "https://100.64.0.1/c.json", "https://[fd00::1]/c.json",
                "https://[::ffff:10.0.0.1]/c.json", "https://0.0.0.0/c.json"):
        assert "non-public address" in refused(server, url), url
    # oversize
    big = docs.url("/clients/big.json")
    docs.routes["/clients/big.json"] = (200, {}, json.dumps({"client_id": big, "redirect_uris": [REDIRECT],
                                                             "pad": "x" * 6000}).encode())
    assert "bytes" in refused(server, big)
    # oversize without Content-Length (chunked): the read stops past 5 KB
    # a redirect is not followed
    moved = docs.url("/clients/moved.json")
    docs.routes["/clients/moved.json"] = (302, {"Location": docs.document("/clients/target.json")}, b"")
    assert "redirect" in refused(server, moved)
    assert docs.hits.get("/clients/target.json", 0) == 0
    # the document must name itself
    other = docs.url("/clients/liar.json")
    docs.routes["/clients/liar.json"] = (200, {}, json.dumps({"client_id": docs.url("/clients/x.json"),
                                                              "redirect_uris": [REDIRECT]}).encode())
    assert "client_id must equal" in refused(server, other)
    # a public client only
    assert "client_secret" in refused(server, docs.document("/clients/secret.json", client_secret="s3cret"))
    assert "not supported" in refused(server, docs.document("/clients/jwt.json",
                                                            token_endpoint_auth_method="private_key_jwt"))
    # not JSON, 404, no redirect_uris, hostile name
    docs.routes["/clients/html.json"] = (200, {}, b"<html>nope</html>")
    assert "not JSON" in refused(server, docs.url("/clients/html.json"))
    assert "HTTP 404" in refused(server, docs.url("/clients/missing.json"))
    assert "redirect_uris" in refused(server, docs.document("/clients/nouris.json", redirect_uris=[]))
    assert "client_name" in refused(server, docs.document("/clients/longname.json", client_name="n" * 500))
    # URL shape
    assert "path" in refused(server, docs.base + "/")
    assert "user information" in refused(server, docs.base.replace("http://", "http://u:p@") + "/c.json")


def test_without_the_test_setting_loopback_and_http_are_refused():
    with pytest.raises(cimd.CimdRefused, match="https"):
        cimd.check_url("http://127.0.0.1:8000/c.json", test_loopback=False)
    with pytest.raises(cimd.CimdRefused, match="non-public"):
        cimd.resolve_public("127.0.0.1", 443, test_loopback=False)
    with pytest.raises(cimd.CimdRefused, match="non-public"):
        cimd.resolve_public("localhost", 443, test_loopback=False)
    with pytest.raises(cimd.CimdRefused, match="non-public"):
        cimd.resolve_public("10.0.0.8", 443, test_loopback=True)  # the test setting opens loopback only
    assert cimd.resolve_public("127.0.0.1", 80, test_loopback=True) == "127.0.0.1"


@pytest.mark.parametrize("header,seconds", [("max-age=120", 120), ("public, max-age=999999", cimd.MAX_TTL_S),
                                            ("no-store", 0), ("no-cache", 0), (None, cimd.DEFAULT_TTL_S)])
def test_cache_lifetime_from_headers(header, seconds):
    assert cimd.cache_seconds(header) == seconds


def test_https_certificate_is_verified(tmp_path):
    """The pinned TLS connection checks the certificate against the URL's host: a self-signed one fails."""
    import datetime
    import ssl

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .sign(key, hashes.SHA256()))
    (tmp_path / "c.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "k.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    docs = Docs()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "c.pem", tmp_path / "k.pem")
    docs.httpd.socket = context.wrap_socket(docs.httpd.socket, server_side=True)
    url = f"https://localhost:{docs.httpd.server_port}/clients/tls.json"
    docs.routes["/clients/tls.json"] = (200, {}, json.dumps({"client_id": url, "redirect_uris": [REDIRECT]}).encode())
    try:
        with pytest.raises(cimd.CimdRefused, match="CERTIFICATE_VERIFY_FAILED|certificate"):
            cimd.fetch(url, test_loopback=True)
    finally:
        docs.httpd.shutdown()
    assert docs.hits == {}  # the handshake failed: no request was served
