"""The live stream of a real `vantage-peers dashboard` process: a change made by another process
reaches an open event stream, and the stream is served again after a restart."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
from http_helpers import free_port, script

SEND = """
import sys
from vantage_peers.db import Database, migrate
from vantage_peers.domains.messaging import store
db = Database(sys.argv[1]); migrate(db)
db.write(lambda c: store.send_message(c, sender="alice", channel="bob", content=sys.argv[2]))
db.close()
"""


@contextlib.contextmanager
def dashboard(db: Path, port: int, name: str = "ann") -> Iterator[str]:
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


def send(db: Path, text: str) -> None:
    subprocess.run([sys.executable, "-c", SEND, str(db), text], check=True, timeout=120)


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
