"""The scheduler core: job cadences (`every_seconds`, `cron`) shared by every process on the file,
failures retried on the next tick, run state for doctor/status, and the thread surviving errors."""

from __future__ import annotations

import io
import threading
from collections import Counter

from conftest import make_settings
from support.recurring_worker import context, job_runner

from vantage_peers.core import cron
from vantage_peers.db import Database, migrate
from vantage_peers.doctor import run_doctor
from vantage_peers.domains.recurring import doctor_lines, scheduler_overview
from vantage_peers.pipeline.app import App
from vantage_peers.pipeline.scheduler import Scheduler, tick_now

MIN = 60_000
PROCESSES = 3


def _app(tmp_path, **overrides) -> App:
    path = tmp_path / "sched.db"
    db = Database(path)
    migrate(db)
    return App(make_settings(path, **overrides), db)


def test_cadenced_jobs_run_once_per_period_across_processes(db, db_path):
    start = cron.to_ms(cron.from_ms(1_780_000_000_000).replace(hour=4, minute=0, second=0, microsecond=0))
    steps = [start + i * 5 * MIN for i in range(37)]  # 04:00 .. 07:00 every 5 minutes
    ctx = context()
    barrier, queue = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=job_runner, args=(str(db_path), steps, barrier, queue)) for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    outcomes = [queue.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    keys = [r["key"] for r in db.read(lambda c: c.query("SELECT key FROM meta WHERE key LIKE '%@%' ORDER BY key"))]
    at = {name: sorted(int(k.split("@")[1]) for k in keys if k.split("@")[0] == name)
          for name in ("hourly", "half-hourly", "flaky", "flaky-fail")}
    # A job never run before is due at once, then follows its cadence, once per period in all.
    assert at["hourly"] == [start, start + 60 * MIN, start + 120 * MIN, start + 180 * MIN]
    assert at["half-hourly"] == [start + i * 30 * MIN for i in range(7)]
    # The daily 06:00 job failed twice (04:00 and 04:05), was retried on each next tick (by one
    # process, not by each), then succeeded at 04:10 and waited for 06:00 for its next run.
    assert at["flaky-fail"] == [start, start + 5 * MIN]
    assert at["flaky"] == [start + 10 * MIN, start + 120 * MIN]
    results = Counter(item for out in outcomes for item in out)
    assert results["flaky:RuntimeError"] == 2
    view = scheduler_overview(db, now=steps[-1])
    jobs = {j["name"]: j for j in view["jobs"]}
    assert jobs["hourly"]["runCount"] == 4 and jobs["hourly"]["schedule"] == "every 3600s"
    assert jobs["hourly"]["nextRunAt"] == start + 240 * MIN
    assert jobs["flaky"]["failCount"] == 2 and jobs["flaky"]["lastStatus"] == "ok"
    assert jobs["flaky"]["nextRunAt"] == start + 26 * 60 * MIN  # 06:00 the next day
    assert jobs["half-hourly"]["schedule"] == "cron */30 * * * *" and not jobs["half-hourly"]["running"]


def test_a_failing_job_is_recorded_and_the_thread_keeps_running(tmp_path):
    app = _app(tmp_path, tick_seconds=0.05)
    ran = threading.Event()
    calls = Counter()

    def broken():
        calls["broken"] += 1
        raise ValueError("boom")

    def fine():
        calls["fine"] += 1
        if calls["fine"] >= 3:
            ran.set()

    app.add_job("broken", broken)
    app.add_job("fine", fine)
    sched = Scheduler(app)
    sched.start()
    try:
        assert ran.wait(30)
    finally:
        sched.stop()
    assert calls["broken"] >= 2  # retried on the next tick, never fatal
    jobs = {j["name"]: j for j in scheduler_overview(app.db)["jobs"]}
    assert jobs["broken"]["lastStatus"] == "error" and jobs["broken"]["lastError"] == "ValueError: boom"
    assert jobs["broken"]["failCount"] >= 2 and jobs["fine"]["lastStatus"] == "ok"
    lines = doctor_lines(app.settings, app.db)
    assert lines[[label for _, label, _ in lines].index("job broken")][:2] == ("WARN", "job broken")
    app.db.close()


def test_clock_injection_wake_and_schedule_change(tmp_path):
    app = _app(tmp_path)
    seen: list[int] = []
    app.add_job("daily", lambda: seen.append(tick_now()), cron="0 6 * * *")
    now = [cron.to_ms(cron.from_ms(1_780_000_000_000).replace(hour=10, minute=0))]
    sched = Scheduler(app, clock=lambda: now[0])
    sched.run_once()
    sched.run_once()
    assert seen == [now[0]]  # first run at once, then not before tomorrow 06:00
    sched.run_once({"daily"}, force=True)  # wake() runs a cadenced job now
    assert len(seen) == 2
    # A new cadence for the same job (a new release) is due at once, then follows the new one.
    app.job_schedules["daily"] = {"every_seconds": 60, "cron": None}
    sched.run_once()
    now[0] += 59_000
    sched.run_once()
    now[0] += 2_000
    sched.run_once()
    assert len(seen) == 4
    # An invalid cadence is reported, never run.
    app.add_job("bad", lambda: seen.append(0), cron="not a cron")
    assert "cronExpression" in str(sched.run_once({"bad"})["bad"]) and 0 not in seen
    app.db.close()


def test_doctor_shows_jobs_and_next_occurrences(tmp_path):
    from vantage_peers.domains.recurring import store

    app = _app(tmp_path, scheduler=True)
    app.db.write(lambda c: store.create(c, payload={"title": "Weekly pipeline health", "assignedTo": "tau",
                                                    "cronExpression": "0 8 * * 1", "timezone": "Europe/Paris"}))
    app.add_job("hourly", lambda: None, every_seconds=3600)
    Scheduler(app).run_once()
    out = io.StringIO()
    assert run_doctor(app.settings, out=out) == 0
    text = out.getvalue()
    assert "scheduler: on in each server process, tick 15s" in text
    assert "job hourly: every 3600s; last run" in text and "ok; next" in text
    assert "recurring tasks: 1 active, 0 paused" in text
    assert "'Weekly pipeline health' -> tau (0 8 * * 1 Europe/Paris" in text
    view = scheduler_overview(app.db)
    assert view["recurring"] == {"active": 1, "paused": 0, "nextDue": view["recurring"]["nextDue"]}
    assert [d["title"] for d in view["recurring"]["nextDue"]] == ["Weekly pipeline health"]
    app.db.close()


def test_recurring_job_ignores_a_dead_processs_lease_and_fires_once(tmp_path):
    from vantage_peers.core.ids import now_ms
    from vantage_peers.domains.recurring import store
    from vantage_peers.server import create_app

    app = create_app(make_settings(tmp_path / "dead.db"))
    template_id = app.db.write(lambda c: store.create(c, payload={
        "title": "t", "assignedTo": "sigma", "cronExpression": "0 0 1 1 *"}, now=now_ms() - 400 * 86_400_000))
    # A process SIGKILLed during its tick left the job's lease behind for a long while.
    app.db.write(lambda c: c.execute("INSERT INTO leases (name, owner, expiresAt) VALUES (?, ?, ?)",
                                     ("job:recurring-tasks", "dead-1", now_ms() + 3_600_000)))
    first, second = Scheduler(app), Scheduler(app)  # two processes ticking at once
    fired = [s.run_once({"recurring-tasks"})["recurring-tasks"]["fired"] for s in (first, second)]
    assert fired == [1, 0]
    assert app.db.read(lambda c: c.scalar("SELECT count(*) FROM tasks WHERE recurringTaskId = ?",
                                          (template_id,))) == 1
    job = {j["name"]: j for j in scheduler_overview(app.db)["jobs"]}["recurring-tasks"]
    assert job["schedule"] == "every tick" and job["runCount"] == 2 and job["lastStatus"] == "ok"
    assert job["lastOwner"] == second.owner and job["lastStartedAt"] <= job["lastFinishedAt"]
    app.db.close()
