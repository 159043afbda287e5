"""Startup: spawn -> initialize -> tools/list over stdio, vantage-peers vs a minimal one-tool MCPServer.

Usage: uv run python benchmarks/startup.py [--runs 7]
Prints the median of each and their ratio (target: ratio <= 1.5).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

MINIMAL = """
from mcp.server.mcpserver import MCPServer
server = MCPServer("minimal")
@server.tool()
def ping() -> str:
    return "pong"
server.run("stdio")
"""


async def _one(params: StdioServerParameters) -> tuple[float, int]:
    start = time.perf_counter()
    async with Client(params) as client:
        tools = (await client.list_tools()).tools
    return time.perf_counter() - start, len(tools)


def measure(params: StdioServerParameters, runs: int) -> tuple[float, int]:
    times, count = [], 0
    for _ in range(runs):
        elapsed, count = anyio.run(_one, params)
        times.append(elapsed)
    return statistics.median(times), count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    minimal = tmp / "minimal.py"
    minimal.write_text(MINIMAL)
    env = {**os.environ, "VP_DB_PATH": str(tmp / "bench.db"), "VP_SCHEDULER": "off"}
    script = Path(sys.executable).parent / "vantage-peers"
    ours = StdioServerParameters(command=str(script), args=[], env=env, cwd=str(tmp))
    base = StdioServerParameters(command=sys.executable, args=[str(minimal)], env=env, cwd=str(tmp))
    measure(ours, 1)  # first run creates and migrates the DB file; not counted
    base_t, _ = measure(base, args.runs)
    ours_t, n_tools = measure(ours, args.runs)
    print(f"minimal MCPServer (1 tool):   median {base_t * 1000:7.1f} ms over {args.runs} runs")
    print(f"vantage-peers ({n_tools} tools):    median {ours_t * 1000:7.1f} ms over {args.runs} runs")
    print(f"ratio: {ours_t / base_t:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
