"""Benchmarks for leases (not a test): `uv run python benchmarks/leases.py [--quick]`.

1. Acquire / release p50 and p95 (one process, one transaction each), at the store and through
   the MCP tools (in-memory client): acquire_slot + release_slot, reserve_paths + release_paths
   with 200 other reservations in force in the repo, checkout_task (claim) + update_task to todo.
2. Death to release: a holder process takes a slot, a path reservation and a task claim (TTL T)
   and is SIGKILLed; the parent sweeps every tick as the scheduler job does. Reports the time from
   the kill to the release of each lease (bounded by T + one tick), median and max over N deaths.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from vantage_peers.core.ids import now_ms  # noqa: E402
from vantage_peers.db import Database, migrate  # noqa: E402
from vantage_peers.domains.leases import paths, slots, sweep  # noqa: E402
from vantage_peers.domains.tasks import lifecycle  # noqa: E402
from vantage_peers.domains.tasks import store as tasks_store  # noqa: E402


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def timed(fn, n: int) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t) * 1000)
    return out


def report(name: str, ms: list[float]) -> None:
    print(f"  {name:<44} p50 {statistics.median(ms):7.3f} ms   p95 {pct(ms, 95):7.3f} ms   (n={len(ms)})")


def store_bench(tmp: Path, n: int) -> None:
    db = Database(tmp / "store.db")
    migrate(db)
    print("acquire + release at the store (one BEGIN IMMEDIATE each):")

    def slot_cycle(i: int) -> None:
        r = db.write(lambda c: slots.acquire(c, name="deploy", capacity=1, ttl=60_000, holder="bob", instance=None,
                                             reason=None, now=now_ms()))
        assert r["acquired"]
        db.write(lambda c: slots.release(c, name="deploy", holder="bob", instance=None, now=now_ms()))

    acquire, release = [], []

    def slot_split(i: int) -> None:
        t = time.perf_counter()
        db.write(lambda c: slots.acquire(c, name="deploy", capacity=1, ttl=60_000, holder="bob", instance=None,
                                         reason=None, now=now_ms()))
        acquire.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        db.write(lambda c: slots.release(c, name="deploy", holder="bob", instance=None, now=now_ms()))
        release.append((time.perf_counter() - t) * 1000)

    timed(slot_split, n)
    report("acquire_slot", acquire)
    report("release_slot", release)
    for i in range(200):  # others' reservations in force: the overlap check reads them all
        db.write(lambda c, i=i: paths.reserve(c, paths=[f"pkg{i}/**"], repo="o/r", holder=f"other{i}", instance=None,
                                              exclusive=True, ttl=3_600_000, reason="bench", partial=False,
                                              now=now_ms()))
    acquire.clear()
    release.clear()

    def path_split(i: int) -> None:
        t = time.perf_counter()
        r = db.write(lambda c: paths.reserve(c, paths=["src/api/**", "docs/*.md"], repo="o/r", holder="bob",
                                             instance=None, exclusive=True, ttl=3_600_000, reason=None,
                                             partial=False, now=now_ms()))
        acquire.append((time.perf_counter() - t) * 1000)
        ids = [g["id"] for g in r["granted"]]
        t = time.perf_counter()
        db.write(lambda c: paths.release(c, ids=ids, paths=None, repo="o/r", holder="bob", now=now_ms()))
        release.append((time.perf_counter() - t) * 1000)

    timed(path_split, n)
    report("reserve_paths (2 globs, 200 held in the repo)", acquire)
    report("release_paths", release)
    tid = db.write(lambda c: tasks_store.create_task(c, payload={"title": "bench", "assignedTo": "bob",
                                                                 "priority": "low", "createdBy": "alice"}))
    acquire.clear()
    release.clear()

    def claim_split(i: int) -> None:
        t = time.perf_counter()
        r = db.write(lambda c: lifecycle.checkout_task(c, task_id=tid, caller="bob", instance=None, now=now_ms(),
                                                       ttl=60_000))
        acquire.append((time.perf_counter() - t) * 1000)
        assert r["claimed"]
        t = time.perf_counter()
        db.write(lambda c: lifecycle.update_task(c, task_id=tid, payload={"status": "todo",
                 "callerOrchestrator": "bob"}, now=now_ms(), max_minutes=480))
        release.append((time.perf_counter() - t) * 1000)

    timed(claim_split, n)
    report("checkout_task (claim lease)", acquire)
    report("update_task -> todo (releases the claim)", release)
    db.close()


def tool_bench(tmp: Path, n: int) -> None:
    from conftest import make_settings, open_tools

    from vantage_peers.server import create_app

    app = create_app(make_settings(tmp / "tools.db"))
    print("acquire + release through the MCP tools (in-memory client):")
    try:
        with open_tools(app) as tools:
            tools.call("acquire_slot", name="warm-up", ttlSeconds=60, callerOrchestrator="bob")
            a, r = [], []
            for _ in range(n):
                t = time.perf_counter()
                tools.call("acquire_slot", name="deploy", ttlSeconds=60, callerOrchestrator="bob")
                a.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                tools.call("release_slot", name="deploy", callerOrchestrator="bob")
                r.append((time.perf_counter() - t) * 1000)
            report("acquire_slot tool", a)
            report("release_slot tool", r)
            a, r = [], []
            for _ in range(n):
                t = time.perf_counter()
                g = tools.call("reserve_paths", paths=["src/**"], repo="o/r", callerOrchestrator="bob")
                a.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                tools.call("release_paths", ids=[g["granted"][0]["id"]], callerOrchestrator="bob")
                r.append((time.perf_counter() - t) * 1000)
            report("reserve_paths tool", a)
            report("release_paths tool", r)
    finally:
        app.db.close()


HOLDER = """
import sys, time
from vantage_peers.db import Database
from vantage_peers.domains.leases import paths, slots
from vantage_peers.domains.tasks import lifecycle
from vantage_peers.core.ids import now_ms
path, tid, ttl, who = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
db = Database(path)
now = now_ms()
assert db.write(lambda c: slots.acquire(c, name="deploy", capacity=1, ttl=ttl, holder=who, instance=None,
                                        reason=None, now=now))["acquired"]
assert db.write(lambda c: paths.reserve(c, paths=["src/**"], repo="o/r", holder=who, instance=None, exclusive=True,
                                        ttl=ttl, reason=None, partial=False, now=now))["granted"]
assert db.write(lambda c: lifecycle.checkout_task(c, task_id=tid, caller=who, instance=None, now=now,
                                                  ttl=ttl))["claimed"]
print("held", flush=True)
while True:
    time.sleep(ttl / 4000)
    db.write(lambda c: __import__("vantage_peers.domains.leases.store", fromlist=["x"]).renew_for_holder(
        c, holder=who, instance=None, now=now_ms()))
"""


def death_bench(tmp: Path, deaths: int, ttl_ms: int, tick_ms: int) -> None:
    db = Database(tmp / "death.db")
    migrate(db)
    tid = db.write(lambda c: tasks_store.create_task(c, payload={"title": "d", "assignedTo": "x", "priority": "low",
                                                                 "createdBy": "alice"}))
    delays: list[int] = []
    for i in range(deaths):
        who = f"holder{i}"
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp / "death.db"), tid, str(ttl_ms), who],
                                stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"held"
        time.sleep(ttl_ms / 2000)  # it renews meanwhile (presence)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed = now_ms()
        while True:
            db.write(lambda c: sweep.expire_due(c, now=now_ms()))
            left = db.read(lambda c, w=who: c.query("SELECT releasedAt FROM agentLeases WHERE holder = ?", (w,)))
            if all(r["releasedAt"] is not None for r in left):
                delays += [r["releasedAt"] - killed for r in left]
                break
            time.sleep(tick_ms / 1000)
    db.close()
    print(f"death to release (TTL {ttl_ms} ms, sweep every {tick_ms} ms, {deaths} deaths x 3 leases):")
    print(f"  median {statistics.median(delays):.0f} ms   max {max(delays)} ms   "
          f"bound TTL + tick = {ttl_ms + tick_ms} ms   (median / TTL = {statistics.median(delays) / ttl_ms:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    args = parser.parse_args()
    n = 100 if args.quick else 500
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        store_bench(tmp, n)
        tool_bench(tmp, n // 2)
        death_bench(tmp, 3 if args.quick else 8, ttl_ms=2000, tick_ms=250)


if __name__ == "__main__":
    main()
