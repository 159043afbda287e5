"""The team flow (issue #30): subscription wake latency for claimable work, and a team run with a kill.

Phase 1 — wake for work: a real stdio server for worker `w` subscribed to `vp://tasks/w` (legacy
resources/subscribe); another process commits a pooled task `w` may claim; the time until the
worker's client receives `notifications/resources/updated` is one sample (target p50 ≤ 300 ms).

Phase 2 — the team: a lead and three workers (tests/support/team_worker.py, each its own stdio
server), --tasks pooled tasks, one worker SIGKILLed while it holds a claim and its file
reservations. Prints the time to finish, the takeover delay after the lapse (claim TTL + one tick
is the bound), and list_tasks calls per worker (each follows a wake: no polling).

Each phase runs on a fresh database of its own, on the SQLite file and on PostgreSQL (the tests'
embedded server).

Usage: uv run python benchmarks/team.py [--backend sqlite|postgres|both] [--rounds 30] [--tasks 12]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "tests" / "support" / "team_worker.py"
_LOCAL = Path(sys.executable).parent / "vantage-peers"
SCRIPT = str(_LOCAL) if _LOCAL.exists() else shutil.which("vantage-peers") or "vantage-peers"
TTL_S, TICK_S = 4, 1.0


def env_for(target: str, who: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VP_")}
    env.update(VP_ORCHESTRATOR=who, VP_INSTANCE_ID=f"{who}-1", VP_EMBEDDINGS="none", VP_TICK_SECONDS=str(TICK_S),
               VP_CLAIM_TTL_SECONDS=str(TTL_S), VP_TEAM_POOLS="builders", VP_TEAM_SERVER=SCRIPT,
               VP_HEARTBEAT_SECONDS="1")
    env["VP_DATABASE_URL" if target.startswith("postgresql") else "VP_DB_PATH"] = target
    return env


def open_db(target: str):
    from vantage_peers.db import migrate, open_target

    db = open_target(target)
    migrate(db)  # a fresh SQLite file: the servers would migrate it too
    return db


def pooled_task(db, title: str) -> str:
    from vantage_peers.domains.tasks import store

    return db.write(lambda c: store.create_task(c, payload={"title": title, "priority": "high", "pool": "builders",
                                                           "createdBy": "lead"}))


async def call(client: Client, tool: str, /, **args: Any) -> Any:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    return result.structured_content


def wake_latency(target: str, rounds: int) -> list[float]:
    db = open_db(target)
    samples: list[float] = []

    async def run() -> None:
        got = {"event": anyio.Event()}

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ServerNotification) and message.method == "notifications/resources/updated":
                got["event"].set()

        params = StdioServerParameters(command=SCRIPT, args=[], env=env_for(target, "w"), cwd=str(ROOT))
        async with Client(params, mode="legacy", message_handler=on_message) as client:
            await call(client, "update_profile", static={"pools": ["builders"]})
            with warnings.catch_warnings():  # legacy subscribe: what Claude Code-era clients send
                warnings.simplefilter("ignore")
                await client.subscribe_resource("vp://tasks/w")
            await anyio.sleep(0.5)
            for i in range(rounds):
                got["event"] = anyio.Event()
                start = time.perf_counter()
                await anyio.to_thread.run_sync(lambda i=i: pooled_task(db, f"wake {i}"))
                with anyio.fail_after(30):
                    await got["event"].wait()
                samples.append((time.perf_counter() - start) * 1000)
                await anyio.sleep(random.uniform(0.1, 0.5))  # not in step with the watcher's poll

    anyio.run(run)
    db.close()
    return samples


def read_log(path: Path) -> list[list[Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def team_run(target: str, tasks: int, workdir: Path) -> dict[str, Any]:
    db = open_db(target)
    procs: dict[str, subprocess.Popen] = {}
    try:
        ids = [pooled_task(db, f"step {i}") for i in range(tasks)]
        t0 = time.monotonic()

        def start(name: str, victim: bool = False) -> None:
            args = [sys.executable, str(WORKER), str(workdir / f"{name}.jsonl")] + (["--victim"] if victim else [])
            procs[name] = subprocess.Popen(args, env=env_for(target, name), cwd=str(workdir), start_new_session=True,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        start("w1", victim=True)
        while not any(r[1] == "holding" for r in read_log(workdir / "w1.jsonl")):
            time.sleep(0.05)
        start("w2")
        start("w3")
        while sum(r[1] == "done" for w in ("w2", "w3") for r in read_log(workdir / f"{w}.jsonl")) < 2:
            time.sleep(0.05)
        os.killpg(procs["w1"].pid, signal.SIGKILL)
        procs["w1"].wait()
        deadline = time.monotonic() + 300
        marks = ",".join("?" * len(ids))
        while db.read(lambda c: c.scalar(f"SELECT count(*) FROM tasks WHERE status = 'done' AND id IN ({marks})",
                                         ids)) < tasks:
            if time.monotonic() > deadline:
                raise SystemExit("the team did not finish in 300 s")
            time.sleep(0.1)
        elapsed = time.monotonic() - t0
        victim = next(r[2] for r in read_log(workdir / "w1.jsonl") if r[1] == "holding")
        leases = db.read(lambda c: c.query("SELECT holder, grantedAt, expiresAt FROM agentLeases WHERE kind = 'task' "
                                           "AND key = ? ORDER BY fencingToken", (victim,)))
        logs = {w: [r[1] for r in read_log(workdir / f"{w}.jsonl")] for w in ("w2", "w3")}
        return {"seconds": round(elapsed, 2), "takeover_ms": leases[1]["grantedAt"] - leases[0]["expiresAt"],
                "taken_by": leases[1]["holder"], "list_calls": {w: k.count("list") for w, k in logs.items()},
                "idle_timeouts": {w: k.count("timeout") for w, k in logs.items()}}
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        db.close()


def backends(which: str, tmp: Path) -> list[tuple[str, Callable[[str], str]]]:
    """(backend name, a function giving a fresh empty database for a phase)."""
    out: list[tuple[str, Callable[[str], str]]] = []
    if which in ("sqlite", "both"):
        out.append(("sqlite", lambda phase: str(tmp / f"{phase}.db")))
    if which in ("postgres", "both"):
        sys.path.insert(0, str(ROOT / "tests"))
        from support import postgres  # the tests' embedded server

        why = postgres.available()
        if why:
            print(f"postgres: skipped ({why})")
        else:
            out.append(("postgres", lambda phase: postgres.fresh_database(f"bench_{phase}")))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    ap.add_argument("--rounds", type=int, default=30, help="wake-latency samples (default 30)")
    ap.add_argument("--tasks", type=int, default=12, help="tasks of the team run (default 12)")
    args = ap.parse_args()
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        for name, fresh in backends(args.backend, Path(tmp)):
            wake = sorted(wake_latency(fresh("wake"), args.rounds))
            p95 = wake[int(0.95 * (len(wake) - 1))]
            print(f"{name:8s} wake for claimable work: p50 {statistics.median(wake):.0f} ms, p95 {p95:.0f} ms, "
                  f"max {wake[-1]:.0f} ms over {len(wake)} rounds (target p50 <= 300 ms)")
            work = Path(tmp) / f"team-{name}"
            work.mkdir()
            run = team_run(fresh("team"), args.tasks, work)
            print(f"{name:8s} 3 workers, {args.tasks} pooled tasks, one SIGKILLed holding a claim: done in "
                  f"{run['seconds']} s; takeover {run['takeover_ms']} ms after the lapse by {run['taken_by']} "
                  f"(bound: one tick, {TICK_S * 1000:.0f} ms); list_tasks calls {run['list_calls']}, idle "
                  f"time-outs {run['idle_timeouts']}")


if __name__ == "__main__":
    main()
