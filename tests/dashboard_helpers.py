"""A dashboard over a test app, driven with Starlette's TestClient, and the CSRF token of a page."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from starlette.testclient import TestClient

from vantage_peers.dashboard import build_dashboard

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


def rows(html: str, marker: str = "<tr") -> int:
    """Body rows of the page's tables (minus each header row)."""
    return html.count(marker) - html.count("<thead><tr")
