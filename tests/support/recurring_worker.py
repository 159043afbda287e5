"""Workers for the cross-process recurring and scheduler tests (spawned processes; keep imports light)."""

from __future__ import annotations

import time
from pathlib import Path


def context():
    """fork on Linux (no re-import per process: the test stays fast on a loaded machine), else spawn."""
    import multiprocessing as mp
    import sys

    return mp.get_context("fork" if sys.platform == "linux" else "spawn")


def ticker(path: str, clock, stop, ready, stalled=None) -> None:
    """Fire due templates at the simulated `clock` until `stop`.

    With `stalled` (an Event), this process is the victim: on its third fire it signals and then
    sleeps inside the open write transaction, holding the lock, until the test SIGKILLs it.
    """
    from vantage_peers.db import open_target
    from vantage_peers.domains.recurring import store
    from vantage_peers.domains.tasks import store as tasks_store

    if stalled is not None:
        original = tasks_store.create_task
        calls = [0]

        def stalling(conn, **kwargs):
            task_id = original(conn, **kwargs)
            calls[0] += 1
            if calls[0] == 3:
                stalled.set()
                time.sleep(3600)
            return task_id

        tasks_store.create_task = stalling
    db = open_target(path)
    ready.wait()
    while not stop.is_set():
        store.fire_due(db, now=clock.value)
        time.sleep(0.002)
    db.close()


def job_runner(path: str, steps: list[int], barrier, queue) -> None:
    """Run a real Scheduler on a simulated clock, step by step in lockstep with the other processes."""
    from vantage_peers.db import Database
    from vantage_peers.pipeline.app import App
    from vantage_peers.pipeline.scheduler import Scheduler, tick_now
    from vantage_peers.pipeline.settings import Settings

    db = Database(Path(path))
    app = App(Settings(db_path=Path(path), scheduler=False), db)
    me: list[str] = []

    def record(name: str):
        def job():
            db.write(lambda c: c.execute("INSERT INTO meta (key, value) VALUES (?, ?)",
                                         (f"{name}@{tick_now()}", sched.owner)))
        return job

    def flaky():
        failures = db.read(lambda c: c.scalar("SELECT count(*) FROM meta WHERE key LIKE 'flaky-fail@%'"))
        if failures < 2:
            db.write(lambda c: c.execute("INSERT INTO meta (key, value) VALUES (?, ?)",
                                         (f"flaky-fail@{tick_now()}", sched.owner)))
            raise RuntimeError("upstream unavailable")
        record("flaky")()

    app.add_job("hourly", record("hourly"), every_seconds=3600)
    app.add_job("half-hourly", record("half-hourly"), cron="*/30 * * * *")
    app.add_job("flaky", flaky, cron="0 6 * * *")
    current = [0]
    sched = Scheduler(app, clock=lambda: current[0])
    for step in steps:
        barrier.wait()
        current[0] = step
        for name, result in sched.run_once().items():
            me.append(f"{name}:{type(result).__name__}")
    barrier.wait()
    db.close()
    queue.put(me)
