"""checkout_task across OS processes on one file: exactly one winner per task, every round."""

from __future__ import annotations

import multiprocessing as mp
from collections import Counter

import pytest
from support.tasks_race_worker import race

from vantage_peers.domains.tasks import store

pytestmark = pytest.mark.backends

PROCESSES = 3
THREADS = 8  # 24 concurrent racers per round
ROUNDS = 12


@pytest.mark.slow
def test_exactly_one_winner_across_processes(app, db_target):
    payload = {"title": "contended", "assignedTo": "pool", "priority": "high", "createdBy": "pi"}
    ids = app.db.write(lambda c: [store.create_task(c, payload=payload) for _ in range(ROUNDS)])
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=race, args=(db_target, p, THREADS, ids, barrier, results))
             for p in range(PROCESSES)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    attempts = [o for out in outcomes for o in out]
    assert len(attempts) == PROCESSES * THREADS * ROUNDS
    wins = Counter(task_id for task_id, _, claimed in attempts if claimed)
    assert wins == Counter({task_id: 1 for task_id in ids})
    winner = {task_id: who for task_id, who, claimed in attempts if claimed}
    for task_id in ids:
        row = app.db.read(lambda c, t=task_id: c.one("SELECT status, assignedTo FROM tasks WHERE id = ?", (t,)))
        assert row == {"status": "in_progress", "assignedTo": winner[task_id]}
        segs = app.db.read(lambda c, t=task_id: c.scalar("SELECT count(*) FROM taskSegments WHERE taskId = ?", (t,)))
        assert segs == 1
