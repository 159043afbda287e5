"""The client side of push.py: read a push stream, and `vantage-peers wait --url` on top of it.

`wait --url` decides like local `wait` (wake.Tracker: the same keys, state file and digest) on the
pending items the stream sends — on connect and whenever they change — so a hook on a machine
without the database waits through `serve`. A dropped stream (a replica stopped or killed) is
reopened, on the next of the given URLs when there are several; every connect sends the whole
pending list, so nothing that arrived meanwhile is missed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2

from ..core.errors import InvalidArgument
from .push import PENDING, PING_SECONDS

RECONNECT_MAX_SECONDS = 5.0  # back-off between reconnects after a drop (0.25 s doubling up to this)


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str | None, dict[str, Any] | None]]:
    """(event id, JSON message) per SSE event; message None for an event without data (the priming
    event). Comment lines (pings) are skipped."""
    ident: str | None = None
    data: list[str] = []
    for line in lines:
        if line == "":
            if ident is not None or data:
                text = "\n".join(data)
                yield ident, json.loads(text) if text.strip() else None
            ident, data = None, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id":
            ident = value
        elif name == "data":
            data.append(value)


def stream_url(url: str) -> str:
    """The push endpoint of a serve URL: `https://host` and `https://host/mcp` both mean /mcp."""
    url = url.rstrip("/")
    return url if url.endswith("/mcp") else url + "/mcp"


class RemoteWaiter:
    """One `wait --url`: connects, reconnects, and hands each pending list to `on_items`."""

    def __init__(self, urls: list[str], token: str | None, *, params: dict[str, str]) -> None:
        if not urls:
            raise InvalidArgument("--url: give the serve URL, e.g. https://vp.example.com/mcp")
        self.urls = [stream_url(u) for u in urls]
        self.headers = {"Accept": "text/event-stream"} | ({"Authorization": f"Bearer {token}"} if token else {})
        self.params = params

    def run(self, deadline: float | None, on_items: Callable[[dict[str, Any]], bool | None]) -> bool:
        """Feed every pending event to `on_items` until it returns True (→ True) or the deadline passes
        (→ False). A first connection that fails on every URL is an InvalidArgument (exit 2)."""
        connected, attempt, pause = False, 0, 0.25
        while True:
            url = self.urls[attempt % len(self.urls)]
            attempt += 1
            left = None if deadline is None else deadline - time.monotonic()
            read = PING_SECONDS * 2 + 5 if left is None else max(0.05, min(left, PING_SECONDS * 2 + 5))
            try:
                with (httpx2.Client(timeout=httpx2.Timeout(10.0, read=read)) as client,
                      client.stream("GET", url, params=self.params, headers=self.headers) as response):
                    if response.status_code != 200:
                        response.read()
                        raise InvalidArgument(f"--url {url}: HTTP {response.status_code}: {_reason(response)}")
                    connected, pause = True, 0.25
                    for _, message in sse_events(response.iter_lines()):
                        if message is not None and message.get("method") == PENDING:
                            if on_items(message["params"]):
                                return True
                            if deadline is not None and time.monotonic() >= deadline:
                                return False
            except httpx2.TimeoutException:
                pass  # the deadline (checked below), or a silent stream: open it again
            except httpx2.TransportError as exc:
                if not connected and attempt >= len(self.urls):
                    raise InvalidArgument(f"--url {url}: cannot connect ({exc})") from None
            if deadline is not None and time.monotonic() >= deadline:
                return False
            if connected:  # dropped: try the next replica, after a short back-off
                time.sleep(pause)
                pause = min(pause * 2, RECONNECT_MAX_SECONDS)


def _reason(response: Any) -> str:
    try:
        doc = response.json()
        return str(doc.get("error_description") or doc.get("error") or doc)[:300]
    except ValueError:
        return response.text[:300]


def wait_remote(urls: list[str], token: str | None, *, who: str | None, instance: str | None,
                kinds: tuple[str, ...], timeout: float | None, state_for: Callable[[str, str | None], Path | None],
                on_armed: Callable[[str], None],
                report: Callable[[list[dict[str, Any]], str], None]) -> list[dict[str, Any]] | None:
    """Like wake.wait_for_new, through a push stream: the new items, or None on timeout. `who` None:
    the token's own identity (the server names it in each event)."""
    from ..wake import Tracker

    params = {"pending": ",".join(kinds)} | ({"orchestrator": who} if who else {}) | (
        {"instance": instance} if instance else {})
    deadline = None if timeout is None else time.monotonic() + timeout
    box: dict[str, Any] = {}

    def on_items(event: dict[str, Any]) -> bool:
        current, name = event["items"], event["orchestrator"]
        if "tracker" not in box:
            box["tracker"] = Tracker(kinds, state_for(name, instance), current, lambda new: report(new, name))
        box["new"] = box["tracker"].step(current)
        if box["new"]:
            return True
        if not box.get("armed") and (deadline is None or time.monotonic() < deadline):
            box["armed"] = True
            on_armed(name)
        return False

    found = RemoteWaiter(urls, token, params=params).run(deadline, on_items)
    return box["new"] if found else None


def run_remote_wait(url: str, token: str | None, kinds_text: str, timeout: float | None, as_json: bool,
                state: str | None, since_now: bool, ready: Any) -> int:
    """`wait --url`: the same kinds, exit codes, digest and state file, through the push stream."""
    import signal
    import threading

    from ..pipeline.settings import Settings
    from ..wake import (
        EXIT_TIMEOUT,
        _armed,
        _print_digest,
        _terminate,
        check_state_file,
        default_state_path,
        load_state,
        parse_kinds,
        parse_timeout,
    )

    kinds = parse_kinds(kinds_text)
    timeout = parse_timeout(timeout)
    if since_now and state:
        raise InvalidArgument("--since-now and --state exclude each other: --since-now keeps no state")
    settings = Settings.from_env()
    urls = [u.strip() for u in url.split(",") if u.strip()]  # several replicas: the next one on a drop
    state_path = check_state_file(Path(state).expanduser(), what="--state") if state else None
    if state_path is not None:
        load_state(state_path, what="--state")

    def state_for(who: str, instance: str | None) -> Path | None:
        if state_path is not None or since_now:
            return state_path
        return default_state_path(settings, who, instance, target="url:" + stream_url(urls[0]))

    def armed(who: str) -> None:
        _armed(who, settings.instance_id, kinds, ready)()

    main = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, _terminate) if main else None
    try:
        new = wait_remote(urls, token, who=settings.orchestrator, instance=settings.instance_id, kinds=kinds,
                          timeout=timeout, state_for=state_for, on_armed=armed,
                          report=lambda items, who: _print_digest(items, who, settings.instance_id, as_json))
    finally:
        if main:
            signal.signal(signal.SIGTERM, before)
    return EXIT_TIMEOUT if new is None else 0
