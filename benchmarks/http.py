"""HTTP transport cost: `vantage-peers serve` (bearer auth) against stdio, on one machine.

- per-call latency p50/p95 of send_message and recall, sequential, through the SDK client on both
  transports (streamable HTTP with the master bearer; stdio to the console script);
- aggregate throughput with 8 concurrent HTTP clients (each its own connection, alternating
  send_message and recall, plain JSON-RPC POSTs as curl or a gateway would send them), spread over
  2 client processes so the load generator is not the bottleneck; zero loss checked by counting rows.

Usage: uv run python benchmarks/http.py [--calls 200] [--seconds 10]
Targets: HTTP p50 <= 2x stdio p50; >= 500 calls/s aggregate on 2 cores.
"""

from __future__ import annotations

import sys
from pathlib import Path

# This file is named http.py: keep its folder off sys.path so `import http.client` finds the stdlib.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import multiprocessing as mp  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

MASTER = "b7" * 32


def _script() -> str:
    local = Path(sys.executable).parent / "vantage-peers"
    return str(local) if local.exists() else shutil.which("vantage-peers")  # type: ignore[return-value]


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


def _load(url: str, clients: int, seconds: float, start_at: float, out) -> None:
    import anyio
    import httpx2

    counts = {"ok": 0, "sent": 0, "errors": 0}

    async def one(n: int) -> None:
        headers = {"Authorization": f"Bearer {MASTER}", "Accept": "application/json, text/event-stream",
                   "Content-Type": "application/json"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            i = 0
            while time.time() < start_at + seconds:
                if i % 2 == 0:
                    call = {"name": "send_message", "arguments": {"channel": "bob", "content": f"{n}-{i}", "from": "x"}}
                else:
                    call = {"name": "recall", "arguments": {"query": "latency", "namespace": "project/bench"}}
                r = await http.post(url, json={"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": call})
                if r.status_code == 200 and '"isError":false' in r.text.replace(" ", ""):
                    counts["ok"] += 1
                    counts["sent"] += i % 2 == 0
                else:
                    counts["errors"] += 1
                i += 1

    async def main() -> None:
        await anyio.sleep(max(0.0, start_at - time.time()))
        async with anyio.create_task_group() as tg:
            for n in range(clients):
                tg.start_soon(one, n)

    anyio.run(main)
    out.put(counts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()

    import anyio
    import httpx2
    from mcp import Client, StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    workdir = Path(tempfile.mkdtemp())
    db = workdir / "bench.db"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    serve = subprocess.Popen([_script(), "serve", "--port", str(port)], env=_env(db), cwd=workdir,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                if httpx2.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                time.sleep(0.1)

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
        print(f"latency over {args.calls} sequential calls each (SDK client), ms:")
        for tool in ("send_message", "recall"):
            h50, h95 = _pct(http_lat[tool], 0.5), _pct(http_lat[tool], 0.95)
            s50, s95 = _pct(stdio_lat[tool], 0.5), _pct(stdio_lat[tool], 0.95)
            print(f"  {tool:13s} http p50 {h50:6.2f} p95 {h95:6.2f} | stdio p50 {s50:6.2f} p95 {s95:6.2f} "
                  f"| http/stdio p50 = {h50 / s50:.2f}x")

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
        procs = [ctx.Process(target=_load, args=(url, 4, args.seconds, start_at, out)) for _ in range(2)]
        for p in procs:
            p.start()
        results = [out.get() for _ in procs]
        for p in procs:
            p.join()
        ok = sum(r["ok"] for r in results)
        sent = sum(r["sent"] for r in results)
        errors = sum(r["errors"] for r in results)
        stored = count() - before
        print(f"throughput, 8 concurrent HTTP clients for {args.seconds:.0f}s: {ok / args.seconds:.0f} calls/s "
              f"({ok} ok, {errors} errors); messages sent {sent}, stored {stored} "
              f"({'no loss' if stored == sent else 'MISMATCH'})")
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(30)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
