"""Memory footprint and indexing throughput of one server process, embeddings off and local.

    uv run python benchmarks/footprint.py                 # both configurations
    uv run python benchmarks/footprint.py --writes 1000 --recalls 100 --modes local shared --runs 3
    uv run python benchmarks/footprint.py --server      # real stdio servers; the shared host measured apart
    uv run python benchmarks/footprint.py --roundtrip   # one-line embedding p50: host vs in-process
    uv run python benchmarks/footprint.py --agents 10 --modes local shared   # ten servers at once, summed

Each configuration runs in a fresh interpreter (RSS is per process) that builds the app the way
the server does (`create_app`, scheduler off so the steps are explicit), then prints VmRSS:
  after load         the app built, tools registered (the model is not loaded yet: off the start-up path)
  after N writes     N short memories stored through the MCP tool and, with embeddings on, embedded by
                     the embedding worker (`indexer.embed_pending`, what the scheduler runs)
  after M recalls    M `recall` calls through the MCP tool (query embedding + fusion)
and the indexing throughput (memories/s of the embedding worker on those N short texts), plus the
peak (VmHWM). That process also hosts the MCP client and the test helpers (≈8 MB).

`--server` measures what an agent's client actually starts: the `vantage-peers` stdio server as a
child process, driven over stdio by an MCP client in this process, scheduler on (it embeds the
writes in the background, as in use); its VmRSS is read from /proc after the handshake, after N
writes once the embedding backlog is empty, and after M recalls, with the p50 / p95 of `recall`.

Modes: `none` (embeddings off), `local` (the model in the server process: VP_MODEL_HOST=inprocess)
and `shared` (the model in the shared host process, #20: VP_MODEL_HOST=shared, a fresh host folder
per run). For `shared` the host's RSS is printed separately, and the totals for 1 and 10 agents are
computed from the measured per-process figures (10 servers share one host).
`--runs K` repeats the in-process harness K times per mode (indexing throughput varies with the
machine's load; the load average is printed with each run).
Figures depend on the machine; they are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORDS = ["deploy", "cache", "index", "token", "budget", "lease", "shard", "window", "retry", "ledger", "cursor", "quota", "anchor", "epoch", "marker", "offset", "sweep", "billing", "login", "search", "backup", "theme", "digest", "webhook", "importer", "audit", "limiter", "flow"]


def rss_mb(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(mode: str, writes: int, recalls: int, db_path: str) -> dict[str, float]:
    import random

    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import open_tools

    from vantage_peers.domains.memory import indexer
    from vantage_peers.domains.memory.services import services
    from vantage_peers.pipeline.settings import Settings
    from vantage_peers.server import create_app

    settings = Settings.from_env({"VP_EMBEDDINGS": "none" if mode == "none" else "local", "VP_SCHEDULER": "off",
                                  "VP_MODEL_HOST": "shared" if mode == "shared" else "inprocess"},
                                 dotenv=False).model_copy(update={"db_path": Path(db_path), "scheduler": False})
    out: dict[str, float] = {}
    app = create_app(settings)
    out["after load"] = rss_mb()
    rng = random.Random(7)
    with open_tools(app) as tools:
        for i in range(writes):
            text = f"{rng.choice(['Ana', 'Bo', 'Chen'])}: " + " ".join(rng.choice(WORDS) for _ in range(12)) + f" #{i}"
            tools.call("store_memory", namespace="bench/footprint", type="note", content=text, createdBy="bench")
        if mode != "none":
            svc = services(app)
            started = time.perf_counter()
            done = 0
            while True:
                n = indexer.embed_pending(app.db, svc.embedder, owner="bench", budget_s=3600,
                                          corpora=app.corpora)["embedded"]
                if not n:
                    break
                done += n
            took = time.perf_counter() - started
            out["indexing memories/s"] = done / took if took else 0.0
        out[f"after {writes} writes"] = rss_mb()
        out["  anonymous (private) "] = rss_mb("RssAnon")
        out["  file-backed (shared libs) "] = rss_mb("RssFile")
        for i in range(recalls):
            tools.call("recall", query=" ".join(rng.choice(WORDS) for _ in range(4)) + f" {i}", limit=10)
        out[f"after {recalls} recalls"] = rss_mb()
        out["  anonymous (private)"] = rss_mb("RssAnon")
        out["  file-backed (shared libs)"] = rss_mb("RssFile")
        if mode == "shared":
            info = services(app).embedder.info()  # type: ignore[union-attr]
            out["host: after recalls"] = _rss_of(info["pid"])
            out["host: peak (VmHWM)"] = _rss_of(info["pid"], "VmHWM")
        if mode == "local":  # what an idle agent's server holds once the model is dropped (local.IDLE_UNLOAD_S)
            from vantage_peers.embedding import local

            model = local.local_embedder()
            model.idle_unload_s = 0.0
            model._unload_if_idle()
            out["after idle unload"] = rss_mb()
    out["peak (VmHWM)"] = rss_mb("VmHWM")
    app.db.close()
    return out


def _child_pids() -> list[int]:
    mine = str(os.getpid())
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == mine:
            out.append(int(stat.parent.name))
    return out


def _rss_of(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _host_pid(host_dir: str) -> int | None:
    from vantage_peers.embedding.shared_model import SharedEmbedder

    info = SharedEmbedder(Path(host_dir)).info()
    return info["pid"] if info else None


def server(mode: str, writes: int, recalls: int, db_path: str, host_dir: str) -> dict[str, float]:
    """RSS of a real `vantage-peers` stdio server process (see the module docstring)."""
    import random
    import sqlite3
    import statistics

    import anyio
    from mcp import Client, StdioServerParameters

    env = {**os.environ, "VP_DB_PATH": db_path, "VP_EMBEDDINGS": "none" if mode == "none" else "local",
           "VP_MODEL_HOST": "shared" if mode == "shared" else "inprocess", "VP_MODEL_HOST_DIR": host_dir,
           "VP_TICK_SECONDS": "1", "VP_ORCHESTRATOR": "bench"}
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(key, None)
    script = Path(sys.executable).with_name("vantage-peers")
    params = StdioServerParameters(command=str(script), args=[], env=env)
    out: dict[str, float] = {}

    def backlog() -> int:
        with sqlite3.connect(db_path, timeout=30) as conn:
            return conn.execute("SELECT count(*) FROM embeddingJobs").fetchone()[0]

    async def run() -> None:
        rng = random.Random(7)
        async with Client(params) as client:
            await client.list_tools()
            (pid,) = _child_pids()
            out["after load"] = _rss_of(pid)
            started = time.perf_counter()
            for i in range(writes):
                text = f"{rng.choice(['Ana', 'Bo', 'Chen'])}: " + " ".join(rng.choice(WORDS) for _ in range(12)) + f" #{i}"
                await client.call_tool("store_memory", {"namespace": "bench/footprint", "type": "note", "content": text})
            while mode != "none" and backlog():
                await anyio.sleep(0.2)
            out["writes+embedding, memories/s"] = writes / (time.perf_counter() - started)
            out[f"after {writes} writes"] = _rss_of(pid)
            host = _host_pid(host_dir) if mode == "shared" else None
            if host:
                out[f"host: after {writes} writes"] = _rss_of(host)
            took = []
            for i in range(recalls):
                started = time.perf_counter()
                await client.call_tool("recall", {"query": " ".join(rng.choice(WORDS) for _ in range(4)) + f" {i}",
                                                  "limit": 10})
                took.append((time.perf_counter() - started) * 1000)
            out[f"after {recalls} recalls"] = _rss_of(pid)
            out["  anonymous (private)"] = _rss_of(pid, "RssAnon")
            out["  file-backed (shared libs)"] = _rss_of(pid, "RssFile")
            out["peak (VmHWM)"] = _rss_of(pid, "VmHWM")
            if took:
                out["recall p50, ms"] = statistics.median(took)
                out["recall p95, ms"] = sorted(took)[int(0.95 * (len(took) - 1))]
            if host:
                out[f"host: after {recalls} recalls"] = _rss_of(host)
                out["host:   file-backed (shared libs)"] = _rss_of(host, "RssFile")
                out["host: peak (VmHWM)"] = _rss_of(host, "VmHWM")
                os.kill(host, 15)  # a fresh host per run (its folder is removed with the run)

    anyio.run(run)
    return out


def roundtrip(queries: int = 300) -> None:
    """p50 of embedding one short line in-process vs through the shared host: the socket's cost."""
    import statistics

    from vantage_peers.embedding.local import LocalEmbedder
    from vantage_peers.embedding.shared_model import SharedEmbedder

    with tempfile.TemporaryDirectory(prefix="vpfp-") as tmp:
        os.chmod(tmp, 0o700)
        client, mine = SharedEmbedder(Path(tmp) / "h"), LocalEmbedder(idle_unload_s=None)
        for embedder in (client, mine):
            embedder.embed(["warm up"])
        figures = {}
        for name, embedder in (("in-process", mine), ("through the host", client), ("in-process again", mine)):
            took = []
            for i in range(queries):
                started = time.perf_counter()
                embedder.embed([f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7) % len(WORDS)]} query {i}"])
                took.append((time.perf_counter() - started) * 1000)
            figures[name] = statistics.median(took)
        os.kill(client.info()["pid"], 15)
    print(f"one-line query embedding p50 (load average {os.getloadavg()[0]:.1f}): "
          + ", ".join(f"{k} {v:.2f} ms" for k, v in figures.items()))


def _pss(pid: int) -> float:
    """Proportional set size: shared pages divided among the processes mapping them (the fair sum)."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def many_servers(mode: str, count: int, writes: int, recalls: int, db_path: str, host_dir: str) -> dict[str, float]:
    """`count` real stdio servers on one file at once, each storing writes/count memories and running
    `recalls` recalls: the sum of their RSS and PSS, and the shared host's (see the module docstring)."""
    import contextlib
    import random
    import sqlite3

    import anyio
    from mcp import Client, StdioServerParameters

    env = {**os.environ, "VP_DB_PATH": db_path, "VP_EMBEDDINGS": "none" if mode == "none" else "local",
           "VP_MODEL_HOST": "shared" if mode == "shared" else "inprocess", "VP_MODEL_HOST_DIR": host_dir,
           "VP_TICK_SECONDS": "1", "VP_ORCHESTRATOR": "bench"}
    script = Path(sys.executable).with_name("vantage-peers")
    out: dict[str, float] = {}

    def backlog() -> int:
        with sqlite3.connect(db_path, timeout=30) as conn:
            return conn.execute("SELECT count(*) FROM embeddingJobs").fetchone()[0]

    async def one(client, seed: int) -> None:
        rng = random.Random(seed)
        for i in range(writes // count):
            text = f"{rng.choice(['Ana', 'Bo', 'Chen'])}: " + " ".join(rng.choice(WORDS) for _ in range(12)) + f" #{seed}-{i}"
            await client.call_tool("store_memory", {"namespace": "bench/footprint", "type": "note", "content": text})
        while mode != "none" and backlog():
            await anyio.sleep(0.2)
        for i in range(recalls):
            await client.call_tool("recall", {"query": " ".join(rng.choice(WORDS) for _ in range(4)) + f" {seed}-{i}",
                                              "limit": 10})

    async def run() -> None:
        async with contextlib.AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(Client(StdioServerParameters(command=str(script), args=[], env=env)))
                       for _ in range(count)]
            for client in clients:
                await client.list_tools()
            async with anyio.create_task_group() as group:
                for seed, client in enumerate(clients):
                    group.start_soon(one, client, seed)
            pids = _child_pids()
            rss = [_rss_of(pid) for pid in pids]
            out["servers"] = len(pids)
            out["server RSS, mean"] = sum(rss) / len(rss)
            out["server RSS, max"] = max(rss)
            out["servers: sum of RSS"] = sum(rss)
            out["servers: sum of PSS"] = sum(_pss(pid) for pid in pids)
            host = _host_pid(host_dir) if mode == "shared" else None
            if host:
                out["host RSS"] = _rss_of(host)
                out["host PSS"] = _pss(host)
                os.kill(host, 15)
            out["total RSS"] = out["servers: sum of RSS"] + out.get("host RSS", 0.0)
            out["total PSS"] = out["servers: sum of PSS"] + out.get("host PSS", 0.0)

    anyio.run(run)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--recalls", type=int, default=100)
    parser.add_argument("--modes", nargs="+", default=["none", "local", "shared"], choices=["none", "local", "shared"])
    parser.add_argument("--runs", type=int, default=1, help="repeat each in-process measurement (throughput)")
    parser.add_argument("--server", action="store_true", help="measure a real stdio server process instead")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "DB"), help=argparse.SUPPRESS)
    parser.add_argument("--agents", type=int, default=0, help="N real stdio servers at once (sum of RSS/PSS)")
    parser.add_argument("--roundtrip", action="store_true", help="only: one-line embedding p50, host vs in-process")
    args = parser.parse_args()
    if args.roundtrip:
        roundtrip()
        return
    if args.agents:
        for mode in args.modes:
            with tempfile.TemporaryDirectory(prefix="vpfp-") as tmp:
                os.chmod(tmp, 0o700)
                figures = many_servers(mode, args.agents, args.writes, args.recalls, str(Path(tmp) / "f.db"),
                                 str(Path(tmp) / "h"))
            print(f"{args.agents} stdio servers at once, {LABELS[mode]} (load average {os.getloadavg()[0]:.1f}):")
            for label, value in figures.items():
                print(f"  {label:<26} {value:8.1f}{'' if label == 'servers' else ' MB'}")
        return
    if args.child:
        print(json.dumps(child(args.child[0], args.writes, args.recalls, args.child[1])))
        return
    measured: dict[str, dict[str, float]] = {}
    for mode in args.modes:
        if args.server:
            with tempfile.TemporaryDirectory(prefix="vpfp-") as tmp:
                os.chmod(tmp, 0o700)
                figures = server(mode, args.writes, args.recalls, str(Path(tmp) / "f.db"), str(Path(tmp) / "h"))
            measured[mode] = figures
            print(f"stdio server, {LABELS[mode]} (load average {os.getloadavg()[0]:.1f}):")
            for label, value in figures.items():
                print(f"  {label:<34} {value:8.1f}{_unit(label)}")
            continue
        for run in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="vpfp-") as tmp:
                os.chmod(tmp, 0o700)
                env = {**os.environ, "VP_MODEL_HOST_DIR": str(Path(tmp) / "h")}
                proc = subprocess.run([sys.executable, __file__, "--writes", str(args.writes), "--recalls",
                                       str(args.recalls), "--child", mode, str(Path(tmp) / "f.db")],
                                      capture_output=True, text=True, check=True, env=env)
                figures = json.loads(proc.stdout.strip().splitlines()[-1])
                if mode == "shared":
                    from vantage_peers.embedding.shared_model import SharedEmbedder

                    info = SharedEmbedder(Path(tmp) / "h").info()
                    if info:
                        os.kill(info["pid"], 15)
            print(f"{LABELS[mode]}, run {run + 1} (load average {os.getloadavg()[0]:.1f}):")
            for label, value in figures.items():
                print(f"  {label:<24} {value:8.1f}{_unit(label)}")
    if args.server and {"local", "shared"} <= set(measured):
        after = f"after {args.recalls} recalls"
        inproc, shared = measured["local"][after], measured["shared"][after]
        host = measured["shared"].get(f"host: {after}", float("nan"))
        print(f"total RSS {after} (computed from the figures above; RSS counts shared library pages in each process):")
        for agents in (1, 10):
            mine = agents * shared + host
            print(f"  {agents:>2} agent(s): model in each server {agents * inproc:7.0f} MB, shared host "
                  f"{mine:7.0f} MB ({agents} × {shared:.0f} + {host:.0f}), {mine / (agents * inproc):.2f}×")
        p50 = measured["local"].get("recall p50, ms"), measured["shared"].get("recall p50, ms")
        if all(p50):
            print(f"  recall p50: in-process {p50[0]:.1f} ms, through the host {p50[1]:.1f} ms")


LABELS = {"none": "embeddings off", "local": "local model in-process (VP_MODEL_HOST=inprocess)",
          "shared": "local model in the shared host (VP_MODEL_HOST=shared)"}


def _unit(label: str) -> str:
    return "" if "memories/s" in label else " ms" if label.endswith("ms") else " MB"


if __name__ == "__main__":
    main()
