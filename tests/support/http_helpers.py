"""A real `vantage-peers serve` subprocess on a free loopback port, and SDK clients that talk to it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

MASTER = "a3" * 32  # 64 hex, as `openssl rand -hex 32` prints


def script() -> str:
    local = Path(sys.executable).parent / "vantage-peers"
    return str(local) if local.exists() else shutil.which("vantage-peers")  # type: ignore[return-value]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    def __init__(self, db: Path, *, env: dict[str, str | None] | None = None, args: list[str] | None = None) -> None:
        """`env` is laid over this process's environment; a None value unsets that variable."""
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/mcp"
        self.db = db
        self.signalled = False
        full = {**os.environ, "VP_DB_PATH": str(db), "VP_SCHEDULER": "off", "BEARER_SECRET_MASTER": MASTER}
        full.pop("VP_ORCHESTRATOR", None)
        for key, value in (env or {}).items():
            if value is None:
                full.pop(key, None)
            else:
                full[key] = value
        self.log = db.parent / f"serve-{self.port}.log"
        self._log = open(self.log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([script(), "serve", "--port", str(self.port), *(args or [])], env=full,
                                     cwd=db.parent, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited {self.proc.returncode}: {self.log.read_text()}")
            try:
                if httpx2.get(f"{self.base}/health", timeout=1).status_code == 200:
                    return
            except httpx2.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("serve did not come up: " + self.log.read_text())

    def terminate(self) -> None:
        """SIGTERM once (a second one during interpreter exit would kill the process mid-close)."""
        if not self.signalled and self.proc.poll() is None:
            self.signalled = True
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
        return self.proc.returncode

    def http(self, method: str, path: str, **kw: Any) -> httpx2.Response:
        return httpx2.request(method, self.base + path, timeout=30, **kw)

    def master(self, method: str, path: str, **kw: Any) -> httpx2.Response:
        headers = {"Authorization": f"Bearer {MASTER}", **kw.pop("headers", {})}
        return self.http(method, path, headers=headers, **kw)

    def mcp(self, token: str | None, fn: Any) -> Any:
        """Run `await fn(client)` with an SDK streamable HTTP client carrying `token`."""
        return anyio.run(mcp_session, self.url, token, fn)


@contextlib.contextmanager
def serving(db: Path, **kw: Any) -> Iterator[Serve]:
    server = Serve(db, **kw)
    try:
        yield server
    finally:
        server.stop()


async def mcp_session(url: str, token: str | None, fn: Any, auth: Any = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (httpx2.AsyncClient(headers=headers, auth=auth, timeout=30) as http,
                Client(streamable_http_client(url, http_client=http)) as client):
        return await fn(client)


def text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def client_credentials_token(server: Serve, client_id: str, secret: str) -> str:
    r = server.http("POST", "/oauth/token", data={"grant_type": "client_credentials", "client_id": client_id,
                                                 "client_secret": secret})
    assert r.status_code == 200, r.text
    return r.json()["access_token"]


def make_client(server: Serve, profile: str, name: str = "agent", **extra: Any) -> dict[str, Any]:
    r = server.master("POST", "/admin/oauth/clients", json={"name": name, "scopeProfile": profile, **extra})
    assert r.status_code == 201, r.text
    return r.json()


def scoped_token(server: Serve, profile: dict[str, Any] | str, name: str | None = None) -> str:
    """An access token of a new client on `profile`: a profile document is created first (master API),
    a name is used as it stands (a default profile such as client-generic)."""
    if isinstance(profile, dict):
        assert server.master("POST", "/admin/oauth/profiles", json=profile).status_code == 200
        profile = profile["profileId"]
    made = make_client(server, profile, name=name or profile)
    return client_credentials_token(server, made["client_id"], made["client_secret"])


# -- client id metadata documents (CIMD) on loopback -----------------------------------------------
REDIRECT = "http://127.0.0.1:9/callback"


class Docs:
    """A loopback web server for metadata documents; counts the fetches of each path."""

    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        docs = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                docs.hits[self.path] = docs.hits.get(self.path, 0) + 1
                status, headers, body = docs.routes.get(self.path, (404, {}, b"{}"))
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", "Content-Length": str(len(body)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return self.base + path

    def document(self, path: str, *, cache: str = "max-age=60", **fields: object) -> str:
        url = self.url(path)
        doc = {"client_id": url, "client_name": f"CIMD client {path}", "redirect_uris": [REDIRECT],
               "token_endpoint_auth_method": "none", "grant_types": ["authorization_code", "refresh_token"],
               **fields}
        self.routes[path] = (200, {"Cache-Control": cache}, json.dumps(doc).encode())
        return url
