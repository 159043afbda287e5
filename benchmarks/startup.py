"""Cold start and `status`, as ratios to a one-tool MCPServer's cold start, measured in one run.

Cases, each a fresh process (issue #34):
- floor: a minimal `MCPServer` with one tool — spawn → initialize → tools/list;
- ours (`VP_TOOLSETS=all` and `core`): `vantage-peers` over stdio — spawn → initialize → tools/list,
  with the scheduler off and no embeddings; and `defaults`: the same with nothing set but the
  database (scheduler on, local embeddings: what a client's one-line configuration starts);
- status: `vantage-peers status` on an empty (migrated) database — spawn → exit;
- wait: `vantage-peers wait --timeout 0` as VP_ORCHESTRATOR=bench (what the plugin's inbox-digest
  hook runs before every prompt) — spawn → exit.

Rounds alternate the cases (the order rotates each round), so load on a shared machine hits them
alike. `--baseline DIR` adds the same cases for another checkout's `vantage_peers` (e.g.
`git archive main | tar -x -C /tmp/base`), run by this venv's Python with PYTHONPATH=DIR, so before
and after are measured in alternation too. Prints, per case, the median time and two ratios to the
floor (the median of the per-round ratios, steadier under load than a ratio of medians): until
tools/list is answered (status: until it exits), until the process has exited (a client waits for
that when it closes the session), and the child process's CPU time (user + system), which load
barely moves; plus the load average before and after.

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


async def _session(params: StdioServerParameters) -> float:
    """The moment tools/list is answered (the client then closes stdin and waits for the exit)."""
    async with Client(params) as client:
        await client.list_tools()
        return time.perf_counter()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(run) -> tuple[float, float, float]:
    """(seconds until ready, seconds until the process exited, CPU seconds of the child process:
    far less sensitive to a loaded machine than wall times)."""
    cpu, start = _children_cpu(), time.perf_counter()
    ready = run()
    end = time.perf_counter()
    return (ready or end) - start, end - start, _children_cpu() - cpu


def _stdio(env: dict[str, str], cwd: Path, script: Path | None = None) -> tuple[float, float, float]:
    args = [str(script)] if script else ["-c", ENTRY]
    params = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(cwd))
    return _timed(lambda: anyio.run(_session, params))


def _command(env: dict[str, str], cwd: Path, *argv: str, ok: tuple[int, ...] = (0,)) -> tuple[float, float, float]:
    def run() -> None:
        done = subprocess.run([sys.executable, "-c", ENTRY, *argv], env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        assert done.returncode in ok, (argv, done.returncode, done.stderr[-500:])

    return _timed(run)


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
        plain = {k: v for k, v in env.items() if k not in ("VP_SCHEDULER", "VP_EMBEDDINGS")}
        cases[f"{label}start, defaults"] = lambda e={**plain, "VP_DB_PATH": str(serve)}: _stdio(e, tmp)
        cases[f"{label}status (empty db)"] = lambda e={**env, "VP_DB_PATH": str(status)}: _command(e, tmp, "status")
        waiter = {**env, "VP_DB_PATH": str(status), "VP_ORCHESTRATOR": "bench"}
        cases[f"{label}wait --timeout 0"] = lambda e=waiter: _command(e, tmp, "wait", "--timeout", "0",
                                                                             ok=(0, 3))  # 3: nothing new
    names = list(cases)
    for name in names:  # warm-up: creates and migrates the files, fills the page cache; not counted
        cases[name]()
    print(f"load average before: {loadavg()}")
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in names}
    for i in range(args.runs):
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            samples[name].append(cases[name]())
    print(f"load average after:  {loadavg()}")
    floor = samples[names[0]]
    print(f"{'case':<34} {'ready ms':>9} {'x floor':>8} {'exited ms':>10} {'x floor':>8} {'CPU ms':>8} "
          f"{'x floor':>8}   (medians of {args.runs} rounds; x floor: median of per-round ratios)")
    for name in names:
        cells = []
        for k in range(3):  # ready (tools/list answered; status: exited), exited, CPU
            mine = [s[k] for s in samples[name]]
            ratio = statistics.median(m / f[k] for m, f in zip(mine, floor, strict=True))
            cells.append(f"{statistics.median(mine) * 1000:{9 if k == 0 else 10 if k == 1 else 8}.1f} {ratio:8.2f}")
        print(f"{name:<34} " + " ".join(cells))
    print("targets: start (all) <= 1.2x, start core < start all, status <= 1.5x the floor")


if __name__ == "__main__":
    main()
