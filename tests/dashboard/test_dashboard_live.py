"""The live stream of a real `vantage-peers dashboard` process: a change made by another process
reaches an open event stream, and the stream is served again after a restart."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest
from support.dashboard_helpers import dashboard_process as dashboard
from support.dashboard_helpers import send_from_another_process as send
from support.http_helpers import free_port


def next_event(lines: Iterator[str], name: str) -> str:
    """The data of the next `event: name` on the stream (keep-alives are skipped)."""
    current = None
    for line in lines:
        if line.startswith("event:"):
            current = line.split(":", 1)[1].strip()
        elif line.startswith("data:") and current == name:
            return line.split(":", 1)[1].strip()
    raise AssertionError("stream ended")


@pytest.mark.slow
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


def test_dashboard_command_refuses_a_taken_port_and_a_bad_name(tmp_path, monkeypatch, capsys):
    import socket

    from vantage_peers.cli import main

    monkeypatch.setenv("VP_DB_PATH", str(tmp_path / "cli.db"))
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        taken = held.getsockname()[1]
        assert main(["dashboard", "--port", str(taken)]) == 2
    assert "cannot listen on 127.0.0.1" in capsys.readouterr().err
    assert main(["dashboard", "--port", "0"]) == 2
    assert main(["dashboard", "--port", str(free_port()), "--name", "<script>"]) == 2
    assert "INVALID_ARGUMENT" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["dashboard", "--help"])
    assert "vantage-peers dashboard --port 8765 --open" in capsys.readouterr().out
