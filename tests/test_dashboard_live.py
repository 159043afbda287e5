"""The live stream of a real `vantage-peers dashboard` process: a change made by another process
reaches an open event stream, and the stream is served again after a restart."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
from dashboard_helpers import dashboard_process as dashboard
from dashboard_helpers import send_from_another_process as send
from http_helpers import free_port


def next_event(lines: Iterator[str], name: str) -> str:
    """The data of the next `event: name` on the stream (keep-alives are skipped)."""
    current = None
    for line in lines:
        if line.startswith("event:"):
            current = line.split(":", 1)[1].strip()
        elif line.startswith("data:") and current == name:
            return line.split(":", 1)[1].strip()
    raise AssertionError("stream ended")


def test_a_change_by_another_process_reaches_the_stream_and_the_view(tmp_path):
    db, port = tmp_path / "live.db", free_port()
    send(db, "before")  # creates the file
    with dashboard(db, port) as base, httpx2.Client(timeout=30) as http:
        with http.stream("GET", base + "/events") as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            lines = stream.iter_lines()
            assert next_event(lines, "hello") == "0"
            send(db, "fresh from another process")
            assert int(next_event(lines, "change")) >= 1
        part = http.get(base + "/messages", headers={"X-Partial": "1"}).text
        assert "fresh from another process" in part and "<html" not in part
    # restart on the same port: the stream is served again (EventSource's retry reconnects)
    with dashboard(db, port) as base, httpx2.Client(timeout=30) as http, \
            http.stream("GET", base + "/events") as stream:
        lines = stream.iter_lines()
        first = next(line for line in lines if line.startswith("retry:"))
        assert first == "retry: 1000"
        send(db, "after restart")
        assert next_event(lines, "change")
