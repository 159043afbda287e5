"""A small GitHub REST client over `outbound` (no extra dependency), with GitHub's rate-limit headers read.

Every request goes through `vantage_peers.core.outbound`: the token never follows a redirect to another host.

Only the scheduler's outbox job calls it. `GITHUB_API_URL` (default https://api.github.com) lets
tests and GitHub Enterprise (`https://host/api/v3`) point elsewhere.
"""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from ... import __version__
from ...core import outbound

API_VERSION = "2022-11-28"
TIMEOUT_SECONDS = 20.0


@dataclass
class Response:
    status: int | None                 # None: no answer (network error, timeout)
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    def rate_limited_until(self, now_ms: int) -> int | None:
        """When GitHub says to stop: `Retry-After` (seconds) or an exhausted `X-RateLimit-Remaining`
        with its `X-RateLimit-Reset` (epoch seconds). None when the answer carries no such limit."""
        retry = self.headers.get("retry-after")
        if retry is not None and self.status in (403, 429):
            try:
                return now_ms + int(float(retry) * 1000)
            except ValueError:
                pass
        if self.headers.get("x-ratelimit-remaining") == "0":
            try:
                return max(now_ms, int(float(self.headers.get("x-ratelimit-reset", "0")) * 1000))
            except ValueError:
                return now_ms + 60_000
        if self.status == 429 or (self.status == 403 and "rate limit" in str(self.body).lower()):
            return now_ms + 60_000  # GitHub's secondary limit: wait at least a minute
        return None


class GitHubClient:
    def __init__(self, *, token: str, api_url: str, timeout: float = TIMEOUT_SECONDS) -> None:
        self.token = token
        self.api_url = api_url.rstrip("/")
        self.timeout = timeout

    def request(self, method: str, path: str, body: dict[str, Any] | None = None,
                query: dict[str, Any] | None = None) -> Response:
        url = self.api_url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = json.dumps(body).encode() if body is not None else None
        reply = outbound.request(method, url, data=data, timeout=self.timeout, headers={
            "Accept": "application/vnd.github+json", "Authorization": f"Bearer {self.token}",
            "X-GitHub-Api-Version": API_VERSION, "User-Agent": f"vantage-peers/{__version__}",
            **({"Content-Type": "application/json"} if data is not None else {}),
        })
        return _from_reply(reply)

    # -- the calls the outbox makes -----------------------------------------------------------
    def comment(self, repo: str, number: int, body: str) -> Response:
        return self.request("POST", f"/repos/{repo}/issues/{number}/comments", {"body": body})

    def find_comment(self, repo: str, number: int, marker: str, pages: int = 10) -> dict[str, Any] | None | Response:
        """The issue's comment holding `marker`; None when there is none; a Response on failure."""
        return self._find_marked(f"/repos/{repo}/issues/{number}/comments", {}, marker, pages)

    def create_issue(self, repo: str, title: str, body: str, labels: list[str]) -> Response:
        return self.request("POST", f"/repos/{repo}/issues", {"title": title, "body": body, "labels": labels})

    def find_issue(self, repo: str, marker: str, label: str, pages: int = 5) -> dict[str, Any] | None | Response:
        query = {"labels": label, "state": "all", "sort": "created", "direction": "desc"}
        return self._find_marked(f"/repos/{repo}/issues", query, marker, pages)

    def _find_marked(self, path: str, query: dict[str, Any], marker: str,
                     pages: int) -> dict[str, Any] | None | Response:
        """Page through a GitHub list (100 a page) for the item whose body holds `marker`."""
        for page in range(1, pages + 1):
            resp = self.request("GET", path, query={**query, "per_page": 100, "page": page})
            if not resp.ok or not isinstance(resp.body, list):
                return resp
            for item in resp.body:
                if isinstance(item, dict) and marker in str(item.get("body") or ""):
                    return item
            if len(resp.body) < 100:
                return None
        return None

    def pull(self, repo: str, number: int) -> Response:
        return self.request("GET", f"/repos/{repo}/pulls/{number}")


def _response(status: int, raw: bytes, headers: Any) -> Response:
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = raw[:500].decode("utf-8", "replace")
    names = {k.lower(): v for k, v in (headers.items() if headers is not None else [])}
    return Response(status=status, body=body, headers=names)


def _from_reply(reply: outbound.Reply) -> Response:
    if reply.status is None:
        return Response(status=None, headers=reply.headers, error=reply.error)
    return _response(reply.status, reply.body, reply.headers)


def fetch_json(url: str, *, headers: dict[str, str], timeout: float,
               secret_headers: tuple[str, ...] = ()) -> Response:
    """GET `url` as JSON (the deployment log endpoint); a timeout is a Response with status None."""
    return _from_reply(outbound.request("GET", url, timeout=timeout, secret_headers=secret_headers,
                                        headers={"User-Agent": f"vantage-peers/{__version__}", **headers}))
