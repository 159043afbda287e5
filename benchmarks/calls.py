"""Per-call latency through the whole call pipeline, as a ratio to the SDK's one-tool floor.

Each tool is called N times through the SDK's in-memory client (the same path as stdio, minus the
pipe): the floor is a bare MCPServer with one `ping` tool; then send_message, check_messages (a
20-message inbox), recall (keyword mode, 1,000 memories) and checkout_task (a fresh open task
each call) on vantage-peers, named as an
orchestrator so that the presence step runs too. Prints p50/p95 in ms and p50 / floor p50, and the
CPU time per call (process time over the timed calls, every thread: client, server and worker),
which a loaded machine moves far less than wall time.

A second floor, "same work": a bare MCPServer whose three tools make the same store calls as ours,
in the same transactions on the same kind of file, without the pipeline (no policy, ownership
check, presence, idempotency argument, answer shaping or MCP Apps extension): `ours / same work` is
what the pipeline and the tools' checks add to the database work itself.

Each case (floor, ours, same work) runs in a fresh process, in an order that rotates each round.

Usage: uv run python benchmarks/calls.py [--calls 2000] [--rounds 3]
Run it from another checkout (cd old && uv run python /path/to/benchmarks/calls.py) to compare.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

CPU: dict[str, float] = {}  # tool -> CPU ms per timed call (this process, every thread): steadier under load


async def _timed(client: Any, tool: str, args: dict[str, Any], calls: int) -> list[float]:
    out = []
    cpu = time.process_time()
    for _ in range(calls):
        start = time.perf_counter()
        result = await client.call_tool(tool, args)
        out.append((time.perf_counter() - start) * 1000)
        assert not result.is_error, result.content
    CPU[tool] = CPU.get(tool, 0.0) + (time.process_time() - cpu) * 1000
    return out


def _task_id(made: Any) -> str:
    """The id a create_task answer carries."""
    assert not made.is_error, made.content
    data = made.structured_content or {}
    return data.get("taskId") or data.get("result") or made.content[0].text.strip('"')


async def _measure(setup: Any, client: Any, calls: int, extra: dict[str, dict[str, Any]] | None = None
                   ) -> dict[str, list[float]]:
    """send_message, check_messages (and `extra`) `calls` times each after 50 untimed, then
    checkout_task of a fresh open task (made by `setup`, untimed) each call."""
    out = {}
    for tool, args in {"send_message": {"channel": "other", "content": "hello"}, "check_messages": {},
                       **(extra or {})}.items():
        await _timed(client, tool, args, 50)
        CPU.pop(tool, None)
        out[tool] = await _timed(client, tool, args, calls)
    tasks = []
    for i in range(calls + 50):
        made = await setup.call_tool("create_task", {"title": f"task {i}", "priority": "medium", "assignedTo": "bench"})
        tasks.append(_task_id(made))
    times = []
    for i, task in enumerate(tasks):
        if i == 50:
            CPU.pop("checkout_task", None)
        took = await _timed(client, "checkout_task", {"taskId": task}, 1)
        if i >= 50:
            times += took
    out["checkout_task"] = times
    return out


def floor(calls: int) -> list[float]:
    import anyio
    from mcp import Client
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name="floor")

    @server.tool()
    def ping() -> str:
        return "pong"

    async def run() -> list[float]:
        async with Client(server) as client:
            await _timed(client, "ping", {}, 50)
            CPU.clear()
            return await _timed(client, "ping", {}, calls)

    return anyio.run(run)


def ours(calls: int) -> dict[str, list[float]]:
    import anyio
    from mcp import Client

    from vantage_peers.pipeline.settings import Settings
    from vantage_peers.server import create_app

    path = Path(tempfile.mkdtemp()) / "calls.db"
    env = {"VP_DB_PATH": str(path), "VP_SCHEDULER": "off", "VP_EMBEDDINGS": "none", "VP_ORCHESTRATOR": "bench"}
    app = create_app(Settings.from_env(env, dotenv=False))

    async def run() -> dict[str, list[float]]:
        async with Client(app.mcp) as client:
            for i in range(20):
                await client.call_tool("send_message", {"channel": "bench", "content": f"inbox {i}"})
            for i in range(1000):
                await client.call_tool("store_memory", {"namespace": "bench", "type": "note",
                                                        "content": f"memory {i} about topic {i % 37}"})
            return await _measure(client, client, calls, {"recall": {"query": "topic 12", "namespace": "bench"}})

    try:
        return anyio.run(run)
    finally:
        app.db.close()


def same_work(calls: int) -> dict[str, list[float]]:
    """The store calls of send_message, check_messages and checkout_task in a bare MCPServer."""
    import anyio
    from mcp import Client
    from mcp.server.mcpserver import MCPServer

    from vantage_peers.core.ids import now_ms
    from vantage_peers.domains.messaging import store as messages
    from vantage_peers.domains.tasks import lifecycle
    from vantage_peers.pipeline.settings import Settings
    from vantage_peers.server import create_app

    path = Path(tempfile.mkdtemp()) / "same.db"
    env = {"VP_DB_PATH": str(path), "VP_SCHEDULER": "off", "VP_EMBEDDINGS": "none", "VP_ORCHESTRATOR": "bench"}
    app = create_app(Settings.from_env(env, dotenv=False))  # the schema, and the tools that make the data
    db = app.db
    floor = MCPServer(name="same-work")

    @floor.tool()
    def send_message(channel: str, content: str) -> dict[str, Any]:
        return db.write(lambda c: messages.send_message(c, sender="bench", channel=channel, content=content))

    @floor.tool()
    def check_messages() -> list[dict[str, Any]]:
        return db.read(lambda c: messages.check_messages(c, recipient="bench", limit=20))

    @floor.tool()
    def checkout_task(taskId: str) -> dict[str, Any]:
        now = now_ms()
        return db.write(lambda c: lifecycle.checkout_task(c, task_id=taskId, caller="bench", instance=None, now=now,
                                                          ttl=1_800_000))

    async def run() -> dict[str, list[float]]:
        async with Client(app.mcp) as setup, Client(floor) as client:
            for i in range(20):
                await setup.call_tool("send_message", {"channel": "bench", "content": f"inbox {i}"})
            return await _measure(setup, client, calls)

    try:
        return anyio.run(run)
    finally:
        db.close()


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1]


CASES = {"floor": lambda n: {"ping": floor(n)}, "ours": lambda n: ours(n), "same": lambda n: same_work(n)}


def one_case(case: str, calls: int) -> dict[str, dict[str, float]]:
    """One case in this process: per tool, p50 and p95 ms and CPU ms per call."""
    CPU.clear()
    out = CASES[case](calls)
    return {tool: {"p50": statistics.median(v), "p95": pct(v, 95), "cpu": CPU[tool] / len(v)} for tool, v in out.items()}


def main() -> None:
    import json
    import subprocess
    import sys

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--case", choices=sorted(CASES), help="run one case in this process, print JSON")
    args = parser.parse_args()
    if args.case:
        print(json.dumps(one_case(args.case, args.calls)))
        return
    # Each case in a fresh process, the order rotating each round: in one process the later case paid
    # for the objects the earlier left (send_message measured 0.73x or 1.19x the same work by order).
    names, rounds = list(CASES), []
    for r in range(args.rounds):
        got = {}
        for case in names[r % 3:] + names[:r % 3]:
            proc = subprocess.run([sys.executable, __file__, "--case", case, "--calls", str(args.calls)],
                                  check=True, capture_output=True, text=True)
            got[case] = json.loads(proc.stdout.strip().splitlines()[-1])
        rounds.append(got)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    def med(case: str, tool: str, key: str) -> float:
        return statistics.median(g[case][tool][key] for g in rounds)

    def ratio(case: str, tool: str, key: str, base: str, base_tool: str) -> float:
        return statistics.median(g[case][tool][key] / g[base][base_tool][key] for g in rounds)

    print(f"{args.rounds} rounds of {args.calls} calls, each case in its own process; medians, ratios per round")
    print(f"{'tool':<16} {'p50 ms':>8} {'p95 ms':>8} {'× floor':>8} {'CPU ms':>8} {'× floor':>8} "
          f"{'× same p50':>11} {'× same CPU':>11}")
    print(f"{'SDK floor':<16} {med('floor', 'ping', 'p50'):8.3f} {med('floor', 'ping', 'p95'):8.3f} {1.0:8.2f} "
          f"{med('floor', 'ping', 'cpu'):8.3f} {1.0:8.2f}")
    for tool in rounds[0]["ours"]:
        same = (f"{ratio('ours', tool, 'p50', 'same', tool):11.2f} {ratio('ours', tool, 'cpu', 'same', tool):11.2f}"
                if tool in rounds[0]["same"] else "")
        print(f"{tool:<16} {med('ours', tool, 'p50'):8.3f} {med('ours', tool, 'p95'):8.3f} "
              f"{ratio('ours', tool, 'p50', 'floor', 'ping'):8.2f} {med('ours', tool, 'cpu'):8.3f} "
              f"{ratio('ours', tool, 'cpu', 'floor', 'ping'):8.2f} {same}")
    for tool in rounds[0]["same"]:
        print(f"{'same: ' + tool:<16} {med('same', tool, 'p50'):8.3f} {med('same', tool, 'p95'):8.3f} "
              f"{ratio('same', tool, 'p50', 'floor', 'ping'):8.2f} {med('same', tool, 'cpu'):8.3f} "
              f"{ratio('same', tool, 'cpu', 'floor', 'ping'):8.2f}")


if __name__ == "__main__":
    main()
