"""Benchmark for recurring tasks (not a test): `uv run python benchmarks/scheduler.py [--templates N]`.

1,000 templates all due at once on one file, 4 processes each running the real scheduler
(`Scheduler.run_once` on every tick, the recurring job included) start ticking together. Reports
the time until every template has fired, which process fired how many, and the duplicates
(tasks beyond one per template) and misses (templates without a task): both must be 0.
A second round does the same with 1 process, for the ratio; a third makes each transaction fire
one template, so that the 4 processes interleave and race on every compare-and-set.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vantage_peers.core.ids import now_ms  # noqa: E402
from vantage_peers.db import Database, migrate  # noqa: E402
from vantage_peers.domains.recurring import store  # noqa: E402


def ticking_process(path: str, tick: float, batch: int, barrier, stop, results) -> None:
    from vantage_peers.pipeline.scheduler import Scheduler, tick_now
    from vantage_peers.pipeline.settings import Settings
    from vantage_peers.server import create_app

    settings = Settings.from_env({}, dotenv=False).model_copy(
        update={"db_path": Path(path), "scheduler": True, "tick_seconds": tick})
    app = create_app(settings)
    if batch != store.FIRE_BATCH:  # smaller transactions: the processes interleave template by template
        app.jobs = [(name, (lambda: store.fire_due(app.db, now=tick_now(), batch=batch))
                     if name == "recurring-tasks" else fn) for name, fn in app.jobs]
    sched = Scheduler(app)
    fired = ticks = 0
    barrier.wait()
    while not stop.is_set():
        result = sched.run_once().get("recurring-tasks")
        if isinstance(result, dict):
            fired += result["fired"]
        elif isinstance(result, Exception):
            results.put(("error", repr(result)))
        ticks += 1
        stop.wait(tick)
    app.db.close()
    results.put(("done", fired, ticks))


def run_round(templates: int, processes: int, tick: float, batch: int = store.FIRE_BATCH) -> dict:
    path = Path(tempfile.mkdtemp(prefix="vp-bench-sched-")) / "bench.db"
    db = Database(path)
    migrate(db)
    created = now_ms() - 400 * 86_400_000  # yearly templates whose 1 January is past: due now, once
    schedules = ["0 0 1 1 *"] * templates
    db.write(lambda c: [store.create(c, payload={"title": f"standup {i}", "assignedTo": f"agent-{i % 20}",
                                                 "cronExpression": expr, "priority": "medium"}, now=created)
                        for i, expr in enumerate(schedules)])
    ctx = mp.get_context("spawn")
    barrier, stop, results = ctx.Barrier(processes + 1), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=ticking_process, args=(str(path), tick, batch, barrier, stop, results))
             for _ in range(processes)]
    for p in procs:
        p.start()
    barrier.wait()  # every process has started up; they all tick from now on
    t0 = time.perf_counter()
    deadline = t0 + 300
    while db.read(lambda c: c.scalar("SELECT count(*) FROM recurringRuns")) < templates:
        if time.perf_counter() > deadline:
            break
        time.sleep(0.005)
    elapsed = time.perf_counter() - t0
    time.sleep(tick * 2)  # let every process tick again: a late duplicate would show now
    stop.set()
    outs = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
    errors = [o for o in outs if o[0] == "error"]
    per_process = sorted((o[1] for o in outs if o[0] == "done"), reverse=True)
    tasks = db.read(lambda c: c.scalar("SELECT count(*) FROM tasks WHERE recurringTaskId IS NOT NULL"))
    fired = db.read(lambda c: c.scalar("SELECT count(DISTINCT recurringTaskId) FROM tasks"))
    runs = db.read(lambda c: c.scalar("SELECT coalesce(sum(runCount), 0) FROM recurringTasks"))
    db.close()
    return {"processes": processes, "batch": batch, "seconds": elapsed, "duplicates": tasks - fired, "misses": templates - fired,
            "runCountTotal": runs, "firedPerProcess": per_process, "errors": errors}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--templates", type=int, default=1000)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--tick", type=float, default=1.0)
    args = parser.parse_args()
    print(f"{args.templates} templates due at once, scheduler tick {args.tick:g}s")
    rounds = [run_round(args.templates, args.processes, args.tick), run_round(args.templates, 1, args.tick),
              run_round(args.templates, args.processes, args.tick, batch=1)]
    for r in rounds:
        print(f"  {r['processes']} process(es), {r['batch']} template(s) per transaction: all fired in {r['seconds']:.3f} s "
              f"({args.templates / r['seconds']:.0f} templates/s); duplicates {r['duplicates']}, "
              f"misses {r['misses']}, sum(runCount) {r['runCountTotal']}; fired per process {r['firedPerProcess']}"
              + (f"; errors {r['errors']}" if r["errors"] else ""))
    print(f"  ratio {args.processes} processes / 1 process: {rounds[0]['seconds'] / rounds[1]['seconds']:.2f}")
    if any(r["duplicates"] or r["misses"] or r["errors"] for r in rounds):
        sys.exit(1)


if __name__ == "__main__":
    main()
