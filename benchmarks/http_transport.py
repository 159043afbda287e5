"""HTTP transport cost: `vantage-peers serve` (bearer auth) against stdio, on one machine.

- per-call latency p50/p95 of send_message and recall, sequential, through the SDK client on both
  transports (streamable HTTP with the master bearer; stdio to the console script);
- the same as plain JSON-RPC (one keep-alive HTTP connection / the stdio pipes): what the server
  and transport cost without the SDK client's own overhead;
- aggregate throughput with 8 concurrent HTTP clients (each its own connection, alternating
  send_message and recall, plain JSON-RPC POSTs as curl or a gateway would send them), spread over
  2 client processes so the load generator is not the bottleneck, against 1 and then 2 serve
  processes on the same file (the stateless transport scales out that way); zero loss checked by
  counting rows.

Usage: uv run python benchmarks/http_transport.py [--calls 200] [--seconds 10]
Targets: HTTP p50 <= 2x stdio p50; >= 500 calls/s aggregate on 2 cores.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import http_load  # noqa: E402 - benchmarks/, beside this script
from support.http_helpers import MASTER, Serve  # noqa: E402
from support.http_helpers import script as _script  # noqa: E402


def _env(db: Path) -> dict[str, str]:
    return {**os.environ, "VP_DB_PATH": str(db), "VP_SCHEDULER": "off", "VP_EMBEDDINGS": "none",
            "BEARER_SECRET_MASTER": MASTER}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def _latency(client, calls: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"send_message": [], "recall": []}
    await client.list_tools()
    for i in range(20):  # seed something to recall, and warm up
        await client.call_tool("store_memory", {"namespace": "project/bench", "type": "note", "createdBy": "b",
                                                "content": f"benchmark memory {i} about latency and transports"})
    for i in range(calls):
        t = time.perf_counter()
        r = await client.call_tool("send_message", {"channel": "bob", "content": f"m{i}", "from": "alice"})
        out["send_message"].append(time.perf_counter() - t)
        assert not r.is_error
        t = time.perf_counter()
        r = await client.call_tool("recall", {"query": "latency transports", "namespace": "project/bench"})
        out["recall"].append(time.perf_counter() - t)
        assert not r.is_error
    return out


def _raw_http(url: str, calls: int) -> dict[str, list[float]]:
    """Plain JSON-RPC POSTs on one keep-alive connection: the server's own per-call cost."""
    import httpx2

    out: dict[str, list[float]] = {"send_message": [], "recall": []}
    headers = {"Authorization": f"Bearer {MASTER}", "Accept": "application/json, text/event-stream"}
    with httpx2.Client(headers=headers, timeout=30) as http:
        for i in range(calls):
            for tool, arguments in _CALLS:
                t = time.perf_counter()
                r = http.post(url, json={"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                         "params": {"name": tool, "arguments": arguments}})
                out[tool].append(time.perf_counter() - t)
                assert r.status_code == 200 and '"isError":false' in r.text.replace(" ", "")
    return out


def _raw_stdio(db: Path, workdir: Path, calls: int) -> dict[str, list[float]]:
    """The same JSON-RPC lines over a stdio server's pipes."""
    import json

    proc = subprocess.Popen([_script()], env=_env(db), cwd=workdir, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def rpc(message: dict) -> dict | None:
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        if "id" not in message:
            return None
        while True:
            reply = json.loads(proc.stdout.readline())
            if reply.get("id") == message["id"]:
                return reply

    rpc({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    rpc({"jsonrpc": "2.0", "method": "notifications/initialized"})
    out: dict[str, list[float]] = {"send_message": [], "recall": []}
    try:
        for i in range(calls):
            for tool, arguments in _CALLS:
                t = time.perf_counter()
                reply = rpc({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                             "params": {"name": tool, "arguments": arguments}})
                out[tool].append(time.perf_counter() - t)
                assert reply and not reply["result"].get("isError")
    finally:
        proc.stdin.close()
        proc.wait(30)
    return out


_CALLS = (("send_message", {"channel": "bob", "content": "raw", "from": "alice"}),
          ("recall", {"query": "latency transports", "namespace": "project/bench"}))


def _report(title: str, http_lat: dict[str, list[float]], stdio_lat: dict[str, list[float]]) -> None:
    print(title)
    for tool in ("send_message", "recall"):
        h50, h95 = _pct(http_lat[tool], 0.5), _pct(http_lat[tool], 0.95)
        s50, s95 = _pct(stdio_lat[tool], 0.5), _pct(stdio_lat[tool], 0.95)
        print(f"  {tool:13s} http p50 {h50:6.2f} p95 {h95:6.2f} | stdio p50 {s50:6.2f} p95 {s95:6.2f} "
              f"| http/stdio p50 = {h50 / s50:.2f}x")


def _start_serve(db: Path, workers: int = 1) -> Serve:
    return Serve(db, env={"VP_EMBEDDINGS": "none"}, args=["--workers", str(workers)])


def _throughput(db: Path, urls: list[str], seconds: float, label: str = "") -> None:
    import apsw

    def count() -> int:
        conn = apsw.Connection(str(db))
        n = conn.execute("SELECT count(*) FROM messages").fetchall()[0][0]
        conn.close()
        return n

    before = count()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start_at = time.time() + 3
    # 8 clients in 2 load processes; with 2 servers each load process talks to its own server.
    procs = [ctx.Process(target=http_load.run, args=([urls[i % len(urls)]], 0, 4, seconds, start_at, out, "recall"))
             for i in range(2)]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    ok = sum(r["ok"] for r in results)
    sent = sum(r["sent"] for r in results)
    errors = sum(r["errors"] for r in results)
    stored = count() - before
    label = label or f"{len(urls)} serve process(es) on one file"
    print(f"throughput, 8 concurrent HTTP clients, {label}, {seconds:.0f}s: "
          f"{ok / seconds:.0f} calls/s ({ok} ok, {errors} errors); messages sent {sent}, stored {stored} "
          f"({'no loss' if stored == sent else 'MISMATCH'})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--workers-only", type=int, default=0,
                        help="only the throughput of one `serve --workers N` (skips the other measurements)")
    args = parser.parse_args()
    if args.workers_only:
        workdir = Path(tempfile.mkdtemp())
        db = workdir / "bench.db"
        server = _start_serve(db, workers=args.workers_only)
        try:
            _throughput(db, [server.url], args.seconds, label=f"1 serve --workers {args.workers_only}")
        finally:
            server.stop()
        return

    import anyio
    import httpx2
    from mcp import Client, StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    workdir = Path(tempfile.mkdtemp())
    db = workdir / "bench.db"
    servers = [_start_serve(db)]
    url = servers[0].url
    try:
        async def over_http():
            async with (httpx2.AsyncClient(headers={"Authorization": f"Bearer {MASTER}"}, timeout=30) as http,
                        Client(streamable_http_client(url, http_client=http)) as client):
                return await _latency(client, args.calls)

        async def over_stdio():
            params = StdioServerParameters(command=_script(), args=[], env=_env(db), cwd=str(workdir))
            async with Client(params) as client:
                return await _latency(client, args.calls)

        http_lat = anyio.run(over_http)
        stdio_lat = anyio.run(over_stdio)
        _report(f"latency, {args.calls} sequential calls per tool through the MCP SDK client, ms:", http_lat, stdio_lat)
        _report(f"latency, {args.calls} sequential plain JSON-RPC calls per tool (server + transport only), ms:",
                _raw_http(url, args.calls), _raw_stdio(db, workdir, args.calls))
        _throughput(db, [url], args.seconds)
        servers.append(_start_serve(db))
        _throughput(db, [s.url for s in servers], args.seconds)
        servers.append(_start_serve(db, workers=2))
        _throughput(db, [servers[-1].url], args.seconds, label="1 serve --workers 2")
    finally:
        for server in servers:
            server.terminate()  # all at once, then each waited for
        for server in servers:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
