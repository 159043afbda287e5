"""Issue #19 case 8 on a real `serve`: Origin/Host parsed (not prefix-matched), and connections that
never finish their request headers (idle, slow-header) closed after VP_HTTP_HEADER_TIMEOUT_SECONDS."""

from __future__ import annotations

import json
import socket
import time

import pytest
from support.http_helpers import serving

from vantage_peers.http.origin import OriginCheck, parse_host, parse_origin

LIST = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2025-06-18"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = tmp_path_factory.mktemp("faults-http") / "vp.db"
    with serving(db, args=["--no-auth"], env={"VP_HTTP_HEADER_TIMEOUT_SECONDS": "1"}) as srv:
        yield srv


CRAFTED = [
    "http://127.0.0.1:1@evil.example",
    "http://localhost:1@evil.example",
    "http://[::1]:1@evil.example",
    "http://127.0.0.1:80.evil.example",
    "http://127.0.0.1:1/@evil.example",
    "http://127.0.0.1:1#@evil.example",
    "http://127.0.0.1:99999",
    "http://127.0.0.1.evil.example:1",
    "https://evil.example",
    "null",
    "javascript:alert(1)",
    "http://user@127.0.0.1:1",
]


@pytest.mark.parametrize("origin", CRAFTED)
def test_crafted_origins_are_refused(server, origin):
    resp = server.http("POST", "/mcp", content=LIST, headers={**HEADERS, "Origin": origin})
    assert resp.status_code == 403, (origin, resp.status_code, resp.text[:200])


@pytest.mark.parametrize("origin", [None, "http://127.0.0.1:5173", "http://localhost:3000", "http://[::1]:8080"])
def test_loopback_origins_still_work(server, origin):
    headers = dict(HEADERS) if origin is None else {**HEADERS, "Origin": origin}
    resp = server.http("POST", "/mcp", content=LIST, headers=headers)
    assert resp.status_code == 200 and resp.json()["result"]["tools"]


@pytest.mark.parametrize("host", ["127.0.0.1:1@evil.example", "evil.example", "127.0.0.1.evil.example:80",
                                  "localhost:1/x", ""])
def test_crafted_host_headers_are_refused(server, host):
    resp = server.http("POST", "/mcp", content=LIST, headers={**HEADERS, "Host": host})
    assert resp.status_code in (400, 421), (host, resp.status_code)
    assert resp.status_code != 200


def test_origin_parsing_unit():
    assert parse_origin("http://127.0.0.1:1@evil.example") is None
    assert parse_origin("http://LOCALHOST:3000") == ("http", "localhost", 3000)
    assert parse_origin("https://vp.example.com") == ("https", "vp.example.com", 443)
    assert parse_host("[::1]:8080") == "::1" and parse_host("a@b") is None
    check = OriginCheck(None, public_base_url="https://vp.example.com/")
    assert check.origin_allowed("https://vp.example.com") and not check.origin_allowed("http://vp.example.com")
    assert not check.origin_allowed("https://vp.example.com:8443")
    assert check.host_allowed("vp.example.com") and not check.host_allowed("vp.example.com.evil.example")


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(4096) == b""
    except ConnectionResetError:
        return True


def test_idle_connection_is_closed(server):
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.settimeout(20)  # the server closes at ~1 s; this only bounds a failing run
        assert _closed(sock)


def test_slow_header_connection_is_closed(server):
    request = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
               f"X-Padding: {'a' * 200}\r\n").encode()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.settimeout(0.2)
        closed = False
        for byte in request:  # one byte every 0.2 s: the headers would take ~50 s
            try:
                sock.send(bytes([byte]))
                if sock.recv(4096) == b"":
                    closed = True
                    break
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
        assert closed, "the slow-header connection was never closed"


@pytest.mark.slow
def test_keep_alive_connection_is_closed_after_its_response_but_a_slow_body_is_not_cut(server):
    body = LIST.encode()
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.settimeout(20)
        sock.sendall(head)
        time.sleep(2.0)  # longer than the header deadline: the request's headers are complete, so it stays
        sock.sendall(body)
        reply = b""
        while b"\r\n\r\n" not in reply:
            reply += sock.recv(65536)
        assert reply.startswith(b"HTTP/1.1 200")
        length = int(next(line.split(b":")[1] for line in reply.split(b"\r\n") if line.lower().startswith(b"content-length")))
        rest = reply.split(b"\r\n\r\n", 1)[1]
        while len(rest) < length:
            rest += sock.recv(65536)
        assert json.loads(rest)["result"]["tools"]
        assert _closed(sock)  # then idle on keep-alive: closed
