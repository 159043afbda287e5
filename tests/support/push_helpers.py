"""Push streams of `vantage-peers serve` (GET /mcp as text/event-stream, #31) read on a thread, and
plain JSON-RPC tool calls: what a remote agent does with nothing but HTTP. Used by tests/http/test_push.py
and benchmarks/replicas.py."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx2

from vantage_peers.http.push_client import sse_events


def profile(who: str) -> dict[str, Any]:
    """A scope profile acting as exactly `who` (its token's stream is `who`'s)."""
    return {"profileId": f"{who}-agent", "description": f"acts as {who}", "fromAllowList": [who],
            "namespaceReadPrefixes": [f"project/{who}"], "namespaceWritePrefixes": [f"project/{who}"]}


def rpc(url: str, token: str, method: str, params: dict[str, Any], client: Any = None) -> dict[str, Any]:
    """One stateless JSON-RPC request to /mcp; the `result` (AssertionError on an error)."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25"}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    r = (client or httpx2).post(url, headers=headers, json=body, timeout=60)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert "result" in doc, doc
    return doc["result"]


def call(url: str, token: str, tool: str, client: Any = None, **args: Any) -> Any:
    result = rpc(url, token, "tools/call", {"name": tool, "arguments": args}, client)
    assert not result.get("isError"), result
    data = result.get("structuredContent")
    return data.get("result", data) if isinstance(data, dict) else data


def read_resource(url: str, token: str, uri: str) -> dict[str, Any]:
    return json.loads(rpc(url, token, "resources/read", {"uri": uri})["contents"][0]["text"])


class Stream:
    """One push stream on a thread: every event as (monotonic time, id, message or None)."""

    def __init__(self, url: str, token: str, *, last_event_id: str | None = None, listen: list[str] | None = None,
                 **params: str) -> None:
        """GET /mcp (the push stream), or with `listen` a 2026-07-28 `subscriptions/listen` POST for those URIs."""
        self.events: list[tuple[float, str | None, dict[str, Any] | None]] = []
        self.status: int | None = None
        self.ended = threading.Event()
        self.error: BaseException | None = None
        split = urlsplit(url)
        self._conn = http.client.HTTPConnection(split.hostname, split.port, timeout=30)
        headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        body = None
        if listen is not None:
            meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "push_helpers", "version": "1"}}
            body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
                               "params": {"notifications": {"resourceSubscriptions": listen}, "_meta": meta}})
            headers |= {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"}
        self._conn.request("GET" if body is None else "POST", f"{split.path}?{urlencode(params)}", body=body,
                           headers=headers)
        self._sock = self._conn.sock  # the response may take it over (a closing response)
        response = self._conn.getresponse()
        self.status = response.status
        self._sock.settimeout(None)  # a quiet stream is fine; close() shuts the socket down
        threading.Thread(target=self._read, args=(response,), daemon=True).start()

    def _read(self, response: Any) -> None:
        def lines() -> Any:
            while line := response.readline():
                yield line.decode().rstrip("\r\n")

        try:
            if self.status == 200:
                for ident, message in sse_events(lines()):
                    self.events.append((time.monotonic(), ident, message))
        except Exception as exc:  # noqa: BLE001 - closed by us (mid-chunk), or the server died
            self.error = exc
        finally:
            self.ended.set()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._conn.close()
        self.ended.wait(10)

    @property
    def last_id(self) -> str | None:
        return next((i for _, i, _ in reversed(self.events) if i), None)

    def uris(self) -> list[str]:
        return [m["params"]["uri"] for _, _, m in self.events if m and m.get("method") == "notifications/resources/updated"]

    def wait_for(self, test: Callable[[], Any], timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = test()
            if got:
                return got
            time.sleep(0.01)
        raise AssertionError(f"timed out; events so far: {self.events}")

    def primed(self) -> str:
        """Wait for the priming event (an id, no data); its id."""
        return self.wait_for(lambda: next((i for _, i, m in self.events if m is None and i), None))
