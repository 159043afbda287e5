"""Messaging throughput and latency on one shared DB file.

- sustained send_message throughput (through the MCP tool layer) with 1, 2 and 4 server
  processes on one file, zero loss verified by counting rows afterwards;
- check_messages latency (p50/p95) with a 10,000-message unread backlog.

Usage: uv run python benchmarks/messaging.py [--per-process 500] [--backlog 10000]
Targets: >= 300 messages/s aggregate at 4 processes; check_messages p50 <= 20 ms at 10k backlog.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import tempfile
import time
from pathlib import Path


def _settings(path: str):
    from vantage_peers.pipeline.settings import Settings

    return Settings.from_env({"VP_DB_PATH": path, "VP_SCHEDULER": "off"}, dotenv=False)


def _sender(path: str, who: str, count: int, barrier, out) -> None:
    import anyio
    from mcp import Client

    from vantage_peers.server import create_app

    app = create_app(_settings(path))

    async def run() -> float:
        async with Client(app.mcp) as client:
            await anyio.to_thread.run_sync(barrier.wait)
            start = time.perf_counter()
            for i in range(count):
                r = await client.call_tool("send_message", {"from": who, "channel": "bob", "content": f"{who} {i}"})
                assert not r.is_error
            return start

    start = anyio.run(run)
    out.put((start, time.perf_counter()))


def throughput(processes: int, per_process: int) -> tuple[float, int]:
    from vantage_peers.db import Database, migrate

    path = str(Path(tempfile.mkdtemp()) / "bench.db")
    migrate(Database(path))
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=_sender, args=(path, f"p{i}", per_process, barrier, out)) for i in range(processes)]
    for p in procs:
        p.start()
    spans = [out.get() for _ in procs]
    for p in procs:
        p.join()
    wall = max(e for _, e in spans) - min(s for s, _ in spans)
    db = Database(path)
    stored = db.conn.scalar("SELECT count(*) FROM messages")
    receipts = db.conn.scalar("SELECT count(*) FROM messageReceipts")
    assert stored == receipts == processes * per_process, (stored, receipts)
    return processes * per_process / wall, stored


def backlog_latency(backlog: int, runs: int = 200) -> tuple[float, float, float]:
    import anyio
    from mcp import Client

    from vantage_peers.domains.messaging import store
    from vantage_peers.server import create_app

    path = str(Path(tempfile.mkdtemp()) / "backlog.db")
    app = create_app(_settings(path))
    for start in range(0, backlog, 1000):
        app.db.write(lambda c, s=start: [store.send_message(c, sender="alice", channel="bob", content=f"m{i}")
                                         for i in range(s, min(s + 1000, backlog))])

    store_times = []
    for _ in range(runs):
        t = time.perf_counter()
        app.db.read(lambda c: store.check_messages(c, recipient="bob"))
        store_times.append(time.perf_counter() - t)

    async def via_tool() -> list[float]:
        times = []
        async with Client(app.mcp) as client:
            for _ in range(runs):
                t = time.perf_counter()
                r = await client.call_tool("check_messages", {"recipient": "bob"})
                times.append(time.perf_counter() - t)
                assert not r.is_error and len(r.structured_content["result"]) == 100
        return times

    tool_times = anyio.run(via_tool)
    tool_times.sort()
    return statistics.median(store_times), statistics.median(tool_times), tool_times[int(len(tool_times) * 0.95)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-process", type=int, default=500)
    parser.add_argument("--backlog", type=int, default=10_000)
    args = parser.parse_args()
    for n in (1, 2, 4):
        rate, stored = throughput(n, args.per_process)
        print(f"send_message, {n} process(es): {rate:8.0f} messages/s aggregate ({stored} stored, 0 lost)")
    store_p50, tool_p50, tool_p95 = backlog_latency(args.backlog)
    print(f"check_messages with {args.backlog} unread: store p50 {store_p50 * 1000:.2f} ms; "
          f"through MCP p50 {tool_p50 * 1000:.2f} ms, p95 {tool_p95 * 1000:.2f} ms (page of 100)")


if __name__ == "__main__":
    main()
