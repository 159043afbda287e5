"""A dashboard over a test app, driven with Starlette's TestClient, and the CSRF token of a page."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
from starlette.testclient import TestClient

from support.http_helpers import script
from vantage_peers.dashboard import build_dashboard
from vantage_peers.http import profiles
from vantage_peers.http.tokens import digest

LOCAL = "http://127.0.0.1:8765"
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@contextlib.contextmanager
def local_client(app: Any, name: str = "ann") -> Iterator[TestClient]:
    dash = build_dashboard(app.db, app.settings, login_required=False, loopback=True, local_name=name)
    with TestClient(dash, base_url=LOCAL, follow_redirects=False) as client:
        yield client


def csrf_of(client: TestClient, path: str = "/messages") -> str:
    page = client.get(path)
    assert page.status_code == 200, page.text
    found = _CSRF.search(page.text)
    assert found, "the page has no CSRF token"
    return found.group(1)


def post(client: TestClient, path: str, data: dict[str, Any], *, token: str | None = None,
         origin: str | None = LOCAL):
    headers = {"Origin": origin} if origin else {}
    return client.post(path, data={**data, "csrf": token if token is not None else csrf_of(client)}, headers=headers)


def add_client(app: Any, client_id: str, secret: str, profile: str, *, read=("*",), allow=("*",),
               records: str = "own") -> None:
    """An OAuth client `client_id` (its secret stored as SHA-256) on a new scope profile `profile`."""
    def write(c):
        profiles.upsert(c, profiles.ScopeProfile(profile, "test", tuple(allow), tuple(read), (), record_read=records))
        c.execute("INSERT INTO oauth_clients (clientId, clientSecretHash, name, scopeProfile, registeredVia, createdAt) "
                  "VALUES (?, ?, 'dash', ?, 'admin', 0)", (client_id, digest(secret), profile))

    app.db.write(write)


def sign_in(client: TestClient, base: str, **form: str):
    """POST the sign-in form of the dashboard behind `serve` (at /dashboard) with its CSRF token."""
    page = client.get("/dashboard/login")
    token = _CSRF.search(page.text).group(1)
    return client.post("/dashboard/login", data={"csrf": token, **form}, headers={"Origin": base})


def rows(html: str, marker: str = "<tr") -> int:
    """Body rows of the page's tables (minus each header row)."""
    return html.count(marker) - html.count("<thead><tr")


SEND = """
import sys
from vantage_peers.db import Database, migrate
from vantage_peers.domains.messaging import store
db = Database(sys.argv[1]); migrate(db)
db.write(lambda c: store.send_message(c, sender=sys.argv[3], channel=sys.argv[4], content=sys.argv[2]))
db.close()
"""


@contextlib.contextmanager
def dashboard_process(db: Path, port: int, name: str = "ann") -> Iterator[str]:
    """A real `vantage-peers dashboard --port PORT` process over `db`; yields its base URL."""
    env = {**os.environ, "VP_DB_PATH": str(db), "VP_EMBEDDINGS": "none"}
    log = open(db.parent / f"dash-{port}.log", "a")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([script(), "dashboard", "--port", str(port), "--name", name], env=env,
                            stdout=log, stderr=subprocess.STDOUT, cwd=db.parent)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError((db.parent / f"dash-{port}.log").read_text())
            try:
                if httpx2.get(base + "/team", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            assert time.monotonic() < deadline, "dashboard did not come up"
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def send_from_another_process(db: Path, text: str, sender: str = "alice", channel: str = "bob") -> None:
    subprocess.run([sys.executable, "-c", SEND, str(db), text, sender, channel], check=True, timeout=120)
