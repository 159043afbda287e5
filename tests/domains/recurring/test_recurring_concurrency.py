"""Several OS processes firing recurring templates on one file: one task per occurrence, ever, even
when a process is SIGKILLed in the middle of its firing transaction."""

from __future__ import annotations

import os
import signal
import time

import pytest
from support.recurring_worker import context, ticker

from vantage_peers.core import cron
from vantage_peers.domains.recurring import store

pytestmark = pytest.mark.backends

MIN = 60_000
STEPS = 30
EVERY = {"* * * * *": 1, "*/2 * * * *": 2, "*/5 * * * *": 5}
PER_SCHEDULE = 40


@pytest.mark.slow
def test_processes_fire_each_occurrence_once_and_a_killed_one_leaves_no_gap(db, db_target):
    start = cron.to_ms(cron.from_ms(1_780_000_000_000).replace(minute=0, second=0, microsecond=0))
    ids: dict[str, int] = {}
    for expr, every in EVERY.items():
        for i in range(PER_SCHEDULE):
            payload = {"title": f"{expr} #{i}", "assignedTo": "pool", "cronExpression": expr}
            ids[db.write(lambda c, p=payload: store.create(c, payload=p, now=start))] = every
    # A zone with a half-hour offset: every 3 minutes of its local clock are every 3 UTC minutes too.
    for i in range(PER_SCHEDULE // 2):
        payload = {"title": f"kolkata #{i}", "assignedTo": "pool", "cronExpression": "*/3 * * * *",
                   "timezone": "Asia/Kolkata"}
        ids[db.write(lambda c, p=payload: store.create(c, payload=p, now=start))] = 3

    ctx = context()
    clock, victim_clock = ctx.Value("q", start), ctx.Value("q", start)
    stop, stalled, ready = ctx.Event(), ctx.Event(), ctx.Barrier(4)
    victim = ctx.Process(target=ticker, args=(db_target, victim_clock, stop, ready, stalled))
    workers = [ctx.Process(target=ticker, args=(db_target, clock, stop, ready)) for _ in range(2)]
    for p in (victim, *workers):
        p.start()
    try:
        ready.wait(timeout=120)  # every process is up and ticking
        # The victim reaches minute 1 first, fires two templates and stalls inside its transaction
        # with the write lock held; the others then tick minute 1 too and queue on the lock.
        victim_clock.value = start + MIN
        assert stalled.wait(60), "the victim never started firing"
        clock.value = start + MIN
        time.sleep(0.3)
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(30)
        for step in range(1, STEPS + 1):
            now = start + step * MIN
            clock.value = now
            deadline = time.monotonic() + 120
            while True:
                due = db.read(lambda c, n=now: c.scalar(
                    "SELECT count(*) FROM recurringTasks WHERE nextRunAt <= ?", (n,)))
                if due == 0:
                    break
                assert time.monotonic() < deadline, f"step {step}: {due} templates never fired"
                time.sleep(0.005)
    finally:
        stop.set()
        for p in (victim, *workers):
            p.join(60)
            if p.is_alive():
                p.kill()
    assert victim.exitcode == -signal.SIGKILL
    assert all(p.exitcode == 0 for p in workers)

    expected_total = 0
    for template_id, every in ids.items():
        expected = [start + m * MIN for m in range(1, STEPS + 1) if m % every == 0]
        expected_total += len(expected)
        got = [r["scheduledAt"] for r in db.read(lambda c, t=template_id: c.query(
            "SELECT scheduledAt FROM recurringRuns WHERE recurringTaskId = ? ORDER BY scheduledAt", (t,)))]
        assert got == expected, template_id
        tasks = db.read(lambda c, t=template_id: c.scalar("SELECT count(*) FROM tasks WHERE recurringTaskId = ?",
                                                          (t,)))
        row = db.read(lambda c, t=template_id: store.get(c, template_id=t))
        assert tasks == len(expected) == row["runCount"]
    assert db.read(lambda c: c.scalar("SELECT count(*) FROM tasks")) == expected_total
    # Every task is the one its run row names (no orphan from the killed transaction).
    assert db.read(lambda c: c.scalar(
        "SELECT count(*) FROM tasks t JOIN recurringRuns r ON r.taskId = t.id")) == expected_total
