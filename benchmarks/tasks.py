"""Benchmarks for tasks (not a test): `uv run python benchmarks/tasks.py [--quick]`.

1. checkout_task contention: 4 processes x 50 racer threads drain 1,000 todo tasks, each racer
   picking among the first todo rows and claiming with checkout_task. Reports claims/s, attempts/s
   and double claims (must be 0), and checks the file afterwards.
2. list_tasks p50 / p95 with 50,000 tasks for assignedTo + status="open", at the store and through
   the MCP tool (in-memory client), plus the query plan.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vantage_peers.core.ids import new_id, now_ms  # noqa: E402
from vantage_peers.db import Database, open_database  # noqa: E402
from vantage_peers.domains.tasks import lifecycle, store  # noqa: E402
from vantage_peers.domains.tasks.rules import OPEN_STATUSES  # noqa: E402
from vantage_peers.pipeline.settings import Settings  # noqa: E402

STATUSES = ["done"] * 6 + ["cancelled"] + ["todo", "in_progress", "review"]


def settings_for(path: Path) -> Settings:
    return Settings.from_env({}, dotenv=False).model_copy(update={"db_path": path, "scheduler": False})


def insert_tasks(db: Database, n: int, *, assignees: int, status: str | None = None) -> list[str]:
    ids = [new_id("tsk") for _ in range(n)]
    base = now_ms()
    rows = []
    rng = random.Random(7)
    for i, task_id in enumerate(ids):
        st = status or rng.choice(STATUSES)
        rows.append((task_id, f"task {i} of the benchmark", f"agent-{i % assignees}", "medium", st, "bench",
                     base + i, base + i))
    db.write(lambda c: c.executemany(
        "INSERT INTO tasks (id, title, assignedTo, priority, status, createdBy, createdAt, updatedAt) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows))
    return ids


# -- 1. contention -------------------------------------------------------------------------
def racer_process(path: str, proc: int, threads: int, barrier, results) -> None:
    db = Database(Path(path))
    out: list[tuple[str, str, bool]] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def racer(n: int) -> None:
        me, rng, mine = f"p{proc}-r{n}", random.Random(proc * 1000 + n), []
        if n == 0:
            barrier.wait()
        start.wait()
        while True:
            todo = db.read(lambda c: [r["id"] for r in c.query(
                "SELECT id FROM tasks WHERE status = 'todo' AND paused = 0 ORDER BY seq LIMIT 64")])
            if not todo:
                break
            task_id = rng.choice(todo)
            res = db.write(lambda c, t=task_id: lifecycle.checkout_task(c, task_id=t, caller=me, instance=None,
                                                                        now=now_ms()))
            mine.append((task_id, me, res["claimed"]))
        with lock:
            out.extend(mine)

    pool = [threading.Thread(target=racer, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    db.close()
    results.put(out)


def bench_contention(processes: int, threads: int, tasks: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        db = open_database(settings_for(path))
        ids = insert_tasks(db, tasks, assignees=1, status="todo")
        ctx = mp.get_context("spawn")
        barrier, results = ctx.Barrier(processes + 1), ctx.Queue()
        procs = [ctx.Process(target=racer_process, args=(str(path), p, threads, barrier, results))
                 for p in range(processes)]
        for p in procs:
            p.start()
        barrier.wait()
        t0 = time.perf_counter()
        outcomes = [o for _ in procs for o in results.get(timeout=600)]
        elapsed = time.perf_counter() - t0
        for p in procs:
            p.join()
        wins = Counter(t for t, _, claimed in outcomes if claimed)
        doubles = sum(n - 1 for n in wins.values() if n > 1)
        winner = {t: who for t, who, claimed in outcomes if claimed}
        rows = db.read(lambda c: c.query("SELECT id, status, assignedTo FROM tasks"))
        mismatched = sum(1 for r in rows if r["status"] != "in_progress" or r["assignedTo"] != winner.get(r["id"]))
        segs = db.read(lambda c: c.scalar("SELECT count(*) FROM taskSegments WHERE endedAt IS NULL"))
        db.close()
    print(f"checkout contention: {processes} processes x {threads} racers over {tasks} tasks")
    print(f"  claims {sum(wins.values())} / {len(ids)} tasks, attempts {len(outcomes)}, elapsed {elapsed:.2f} s")
    print(f"  claims/s {sum(wins.values()) / elapsed:,.0f}   attempts/s {len(outcomes) / elapsed:,.0f}")
    print(f"  double claims {doubles}   rows not owned by their single winner {mismatched}   open segments {segs}")


# -- 2. list latency -----------------------------------------------------------------------
def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bench_list(total: int, runs: int) -> None:
    from anyio.from_thread import start_blocking_portal
    from mcp import Client

    from vantage_peers.server import create_app

    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(settings_for(Path(tmp) / "bench.db"))
        insert_tasks(app.db, total, assignees=50)
        who = [f"agent-{i}" for i in range(50)]
        plan = app.db.read(lambda c: c.query(
            "EXPLAIN QUERY PLAN SELECT * FROM tasks WHERE assignedTo = ? AND status IN "
            "('todo', 'in_progress', 'review', 'blocked') ORDER BY updatedAt DESC, id DESC LIMIT 21", ("agent-1",)))
        store_ms = []
        for i in range(runs):
            t0 = time.perf_counter()
            page = app.db.read(lambda c, a=who[i % 50]: store.list_tasks(
                c, limit=20, cursor=None, fields="full", assigned_to=a, statuses=OPEN_STATUSES))
            store_ms.append((time.perf_counter() - t0) * 1000)
            assert page["items"]
        tool_ms = []
        with start_blocking_portal() as portal, portal.wrap_async_context_manager(Client(app.mcp)) as client:
            for i in range(runs):
                t0 = time.perf_counter()
                portal.call(client.call_tool, "list_tasks", {"assignedTo": who[i % 50], "status": "open"})
                tool_ms.append((time.perf_counter() - t0) * 1000)
        app.db.close()
    print(f"list_tasks assignedTo + status=open over {total:,} tasks ({runs} runs, limit 20, full)")
    print("  plan: " + " | ".join(r["detail"] for r in plan))
    print(f"  store p50 {statistics.median(store_ms):.3f} ms  p95 {percentile(store_ms, 0.95):.3f} ms")
    print(f"  MCP tool (in-memory client) p50 {statistics.median(tool_ms):.3f} ms  "
          f"p95 {percentile(tool_ms, 0.95):.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sizes for a smoke run")
    args = parser.parse_args()
    if args.quick:
        bench_contention(2, 10, 100)
        bench_list(5_000, 50)
    else:
        bench_contention(4, 50, 1_000)
        bench_list(50_000, 300)


if __name__ == "__main__":
    main()
