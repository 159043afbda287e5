"""Cold start and `status`, as ratios to a one-tool MCPServer's cold start, measured in one run.

Cases, each a fresh process (issue #34):
- floor: a minimal `MCPServer` with one tool — spawn → initialize → tools/list;
- ours (`VP_TOOLSETS=all` and `core`): `vantage-peers` over stdio — spawn → initialize → tools/list;
- status: `vantage-peers status` on an empty (migrated) database — spawn → exit.

Rounds alternate the cases (the order rotates each round), so load on a shared machine hits them
alike. `--baseline DIR` adds the same cases for another checkout's `vantage_peers` (e.g.
`git archive main | tar -x -C /tmp/base`), run by this venv's Python with PYTHONPATH=DIR, so before
and after are measured in alternation too. Prints, per case, the median time and two ratios to the
floor: median / median, and the median of the per-round ratios (steadier under load); and the
child process's CPU time (user + system) with its ratio, which load barely moves; plus the load
average before and after.

Usage: uv run python benchmarks/startup.py [--runs 9] [--baseline DIR] [--bytecode]
`--bytecode` lets every process write and use .pyc files (in a private PYTHONPYCACHEPREFIX), as an
installed package does; without it the environment's PYTHONDONTWRITEBYTECODE applies.
Targets: cold start <= 1.2x the floor (all), `core` faster than `all`, status <= 1.5x the floor.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
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
ENTRY = "import sys; from vantage_peers.cli import main; sys.exit(main())"  # what the console script runs
REPO = Path(__file__).resolve().parent.parent


async def _session(params: StdioServerParameters) -> int:
    async with Client(params) as client:
        return len((await client.list_tools()).tools)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(run) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child process: far less sensitive to a loaded machine)."""
    cpu, start = _children_cpu(), time.perf_counter()
    run()
    return time.perf_counter() - start, _children_cpu() - cpu


def _stdio(env: dict[str, str], cwd: Path, script: Path | None = None) -> tuple[float, float]:
    args = [str(script)] if script else ["-c", ENTRY]
    params = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(cwd))
    return _timed(lambda: anyio.run(_session, params))


def _status(env: dict[str, str], cwd: Path) -> tuple[float, float]:
    return _timed(lambda: subprocess.run([sys.executable, "-c", ENTRY, "status"], env=env, cwd=cwd, check=True,
                                         stdout=subprocess.DEVNULL))


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--baseline", type=Path, help="another checkout whose vantage_peers to measure too")
    parser.add_argument("--bytecode", action="store_true", help="write and use .pyc files (a private cache)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    minimal = tmp / "minimal.py"
    minimal.write_text(MINIMAL)
    base_env = {**os.environ, "VP_SCHEDULER": "off", "VP_EMBEDDINGS": "none"}
    base_env.pop("VP_ORCHESTRATOR", None)
    if args.bytecode:
        base_env.update(PYTHONDONTWRITEBYTECODE="", PYTHONPYCACHEPREFIX=str(tmp / "pyc"))
    checkouts = {"": REPO} | ({"baseline ": args.baseline.resolve()} if args.baseline else {})
    cases = {"floor (1-tool MCPServer)": lambda: _stdio(base_env, tmp, minimal)}
    for label, root in checkouts.items():
        env = {**base_env, "PYTHONPATH": str(root)}
        serve, status = tmp / f"{label.strip() or 'ours'}-serve.db", tmp / f"{label.strip() or 'ours'}-status.db"
        for toolsets in ("all", "core"):
            run_env = {**env, "VP_DB_PATH": str(serve), "VP_TOOLSETS": toolsets}
            cases[f"{label}start VP_TOOLSETS={toolsets}"] = lambda e=run_env: _stdio(e, tmp)
        cases[f"{label}status (empty db)"] = lambda e={**env, "VP_DB_PATH": str(status)}: _status(e, tmp)
    names = list(cases)
    for name in names:  # warm-up: creates and migrates the files, fills the page cache; not counted
        cases[name]()
    print(f"load average before: {loadavg()}")
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for i in range(args.runs):
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            wall, used = cases[name]()
            times[name].append(wall)
            cpu[name].append(used)
    print(f"load average after:  {loadavg()}")
    floor = names[0]
    floor_median, floor_cpu = statistics.median(times[floor]), statistics.median(cpu[floor])
    print(f"{'case':<34} {'wall ms':>8} {'x floor':>8} {'x floor/round':>14} {'CPU ms':>8} {'CPU x floor':>12}"
          f"   ({args.runs} rounds)")
    for name in names:
        median, used = statistics.median(times[name]), statistics.median(cpu[name])
        per_round = statistics.median(t / f for t, f in zip(times[name], times[floor], strict=True))
        print(f"{name:<34} {median * 1000:8.1f} {median / floor_median:8.2f} {per_round:14.2f} "
              f"{used * 1000:8.1f} {used / floor_cpu:12.2f}")
    print("targets: start (all) <= 1.2x, start core < start all, status <= 1.5x the floor")


if __name__ == "__main__":
    main()
