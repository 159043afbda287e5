"""Kill -9 chaos for leases: worker processes compete for the same task claims, overlapping path
reservations and a capacity-1 slot on one DB file while the parent SIGKILLs them at random and
sweeps expired leases every tick (as the scheduler job does).

Each worker, while it holds a lease, renews it (compare-and-set) and, only if the renewal
succeeded, appends a `use` record with the lease's fencing token to a shared O_APPEND log. The
parent then checks, from the log and the file:
- fencing order: for every key (and every pair of overlapping exclusive path patterns), no use
  with a lower token comes after a use with a higher token: never two holders at once;
- in the file, the holding intervals [grantedAt, end) of one key never overlap, tokens are unique;
- every lease of a killed holder was released by the first sweep at or after its expiry that could
  see it (so within TTL + one tick of the holder's last renewal when its commit was prompt), never
  before its expiry, and none is left unreleased. Each sweep records the unreleased leases its own
  transaction saw: a grant committed late (a frozen or descheduled worker commits long after the
  `now` its expiry counts from, and may die before it can log the commit) is due at the first sweep
  that saw it, not at one whose snapshot predates it.
Used by tests/domains/leases/test_leases_chaos.py (VP_LEASES_CHAOS_SECONDS sets its length).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

TASKS = 3
PATTERNS = ("src/**", "src/a.py", "src/*.py", "docs/**")
SLOT = "deploy"
REPO = "chaos/repo"


def worker_main(path: str, who: str, instance: str, log: str, seed: str, ttl_ms: str) -> None:
    from vantage_peers.core.ids import now_ms
    from vantage_peers.db import open_target
    from vantage_peers.domains.leases import paths, slots
    from vantage_peers.domains.leases import store as leases
    from vantage_peers.domains.tasks import lifecycle

    rng = random.Random(int(seed))
    ttl = int(ttl_ms)
    db = open_target(os.environ.get("VP_CHAOS_TARGET") or path, busy_timeout_ms=10_000)
    tasks = Path(path).with_suffix(".tasks").read_text().split()
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    holder = f"{who}/{instance}"

    def note(*record: Any) -> None:
        os.write(fd, (json.dumps(record) + "\n").encode())

    def now_in(c) -> int:
        """The time read inside the write, once it sees the latest commits (SQLite holds the write lock;
        PostgreSQL takes its snapshot at the first statement): a grant is then stamped after the release
        it saw, however long the write waited for the lock on a loaded machine (check() compares stamps)."""
        c.scalar("SELECT 1")
        return now_ms()

    note("start", holder, os.getpid())
    while True:
        kind = rng.choice(("task", "path", "slot"))
        lease_id, key, token = None, None, None
        if kind == "task":
            key = rng.choice(tasks)
            r = db.write(lambda c, k=key: lifecycle.checkout_task(c, task_id=k, caller=who, instance=instance,
                                                                  now=now_in(c), ttl=ttl))
            if r["claimed"]:
                row = db.read(lambda c, k=key: leases.latest(c, kind="task", scope="", key=k))
                lease_id, token = row["id"], r["fencingToken"]
        elif kind == "path":
            key = rng.choice(PATTERNS)
            r = db.write(lambda c, k=key: paths.reserve(c, paths=[k], repo=REPO, holder=who, instance=instance,
                                                        exclusive=True, ttl=ttl, reason="chaos", partial=False,
                                                        now=now_in(c)))
            if r["granted"]:
                lease_id, token = r["granted"][0]["id"], r["granted"][0]["fencingToken"]
        else:
            key = SLOT
            r = db.write(lambda c: slots.acquire(c, name=SLOT, capacity=1, ttl=ttl, holder=who,
                                                 instance=instance, reason=None, now=now_in(c)))
            if r["acquired"]:
                lease_id, token = r["id"], r["fencingToken"]
        if lease_id is None:
            time.sleep(rng.uniform(0.005, 0.03))
            continue
        note("grant", kind, key, token, holder, lease_id)
        for _ in range(rng.randint(1, 4)):
            # Renew, then use: a lease that lapsed (a slow holder) is never used.
            if not db.write(lambda c, i=lease_id: leases.renew(c, ids=[i], holder=who, now=now_in(c))):
                note("lost", kind, key, token, holder)
                break
            note("use", kind, key, token, holder)
            time.sleep(rng.uniform(0.005, 0.05))
        else:
            if kind == "task":
                db.write(lambda c, k=key: lifecycle.update_task(c, task_id=k, payload={"status": "todo",
                         "callerOrchestrator": who}, now=now_in(c), max_minutes=480))
            else:
                db.write(lambda c, i=lease_id: leases.release(c, ids=[i], now=now_in(c), reason="released", by=who,
                                                              holder=who))
            note("release", kind, key, token, holder)


def prepare(path: Path, target: str) -> None:
    from vantage_peers.db import migrate, open_target
    from vantage_peers.domains.tasks import store as tasks_store

    db = open_target(target)
    migrate(db)
    ids = db.write(lambda c: [tasks_store.create_task(c, payload={"title": f"chaos {i}", "assignedTo": "w0",
                                                                  "priority": "low", "createdBy": "boss"})
                              for i in range(TASKS)])
    db.close()
    path.with_suffix(".tasks").write_text("\n".join(ids))


def spawn(path: Path, who: str, instance: str, log: Path, seed: int, ttl_ms: int,
          target: str | None = None) -> subprocess.Popen:
    here = str(Path(__file__).resolve().parent)
    code = "import sys, leases_chaos; leases_chaos.worker_main(*sys.argv[1:7])"
    env = {**os.environ, "PYTHONPATH": here + os.pathsep + os.environ.get("PYTHONPATH", ""),
           **({"VP_CHAOS_TARGET": target} if target else {})}  # PostgreSQL (issue #25); tasks stay beside path
    return subprocess.Popen([sys.executable, "-c", code, str(path), who, instance, str(log), str(seed), str(ttl_ms)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def run(tmp: Path, *, seconds: float, workers: int = 4, ttl_ms: int = 1500, tick_ms: int = 300,
        kill_every: float = 0.4, seed: int = 1, database_url: str | None = None) -> dict[str, Any]:
    """Run the chaos, then wait TTL + 2 ticks with the sweeper still on; returns figures and the log."""
    from vantage_peers.core.ids import now_ms
    from vantage_peers.db import open_target
    from vantage_peers.domains.leases import sweep

    rng = random.Random(seed)
    path, log = tmp / "leases.db", tmp / "leases.log"
    target = database_url or str(path)
    prepare(path, target)
    db = open_target(target, busy_timeout_ms=10_000)
    procs: dict[int, tuple[subprocess.Popen, str]] = {}  # slot -> (process, "who/instance")
    killed: dict[str, int] = {}  # holder "who/instance" -> kill time (ms)
    ticks: list[tuple[int, list[str]]] = []  # (sweep time, unreleased lease ids its transaction saw)

    def tick() -> None:
        t = now_ms()

        def work(c) -> list[str]:
            seen = [r["id"] for r in c.query("SELECT id FROM agentLeases WHERE releasedAt IS NULL")]
            sweep.expire_due(c, now=t)
            return seen

        ticks.append((t, db.write(work)))
    up: dict[str, float] = {}  # holder -> when its "start" line was seen
    offset = 0
    n = 0

    def start(slot: int) -> None:
        # Every process is another orchestrator (one orchestrator's own reservations never conflict).
        nonlocal n
        n += 1
        who, instance = f"w{n}", f"i{n}"
        procs[slot] = (spawn(path, who, instance, log, seed * 1000 + n, ttl_ms, database_url), f"{who}/{instance}")

    for slot in range(workers):
        start(slot)
    wait_until = time.monotonic() + 120  # the clock starts once every first worker is up (slow imports)
    while time.monotonic() < wait_until and (not log.exists() or log.read_text().count('"start"') < workers):
        time.sleep(0.1)
    deadline = time.monotonic() + seconds
    next_kill = time.monotonic() + kill_every
    next_tick = time.monotonic()
    while time.monotonic() < deadline:
        now_m = time.monotonic()
        if now_m >= next_tick:
            tick()
            next_tick = now_m + tick_ms / 1000
        if log.exists():  # which workers are up (imports take seconds on a loaded machine)
            with log.open() as f:
                f.seek(offset)
                chunk = f.read()
            complete = chunk[:chunk.rfind("\n") + 1]
            offset += len(complete.encode())
            for line in complete.splitlines():
                rec = json.loads(line)
                if rec[0] == "start":
                    up[rec[1]] = now_m
        ready = [slot for slot, (_, holder) in procs.items() if now_m - up.get(holder, now_m) >= 0.3]
        if now_m >= next_kill and ready:
            slot = rng.choice(ready)
            proc, holder = procs[slot]
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            killed[holder] = now_ms()
            start(slot)
            next_kill = now_m + rng.uniform(kill_every / 2, kill_every * 1.5)
        time.sleep(0.02)
    # The last generation is killed too, at a moment one of them holds a lease, so at least one lease
    # must lapse by expiry (on a loaded machine the random kills above may all land between leases).
    live = {holder for _, holder in procs.values()}
    hold_deadline = time.monotonic() + 120
    while time.monotonic() < hold_deadline:
        tick()
        for proc, _ in procs.values():  # frozen, so a lease seen held is still held at the kill
            proc.send_signal(signal.SIGSTOP)
        held = db.read(lambda c: c.query("SELECT holder, holderInstance FROM agentLeases WHERE releasedAt IS NULL"))
        if any(f"{r['holder']}/{r['holderInstance']}" in live for r in held):
            break
        for proc, _ in procs.values():
            proc.send_signal(signal.SIGCONT)
        time.sleep(0.05)
    for proc, holder in procs.values():
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed[holder] = now_ms()
    end = time.monotonic() + (ttl_ms + 2 * tick_ms) / 1000
    while time.monotonic() < end:
        tick()
        time.sleep(tick_ms / 1000)
    tick()
    rows = db.read(lambda c: c.query("SELECT * FROM agentLeases ORDER BY seq"))
    db.close()
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return {"rows": rows, "records": records, "ticks": ticks, "killed": killed, "ttl_ms": ttl_ms,
            "tick_ms": tick_ms}


def check(result: dict[str, Any]) -> dict[str, Any]:
    """Assert the invariants; returns figures (grants, uses, kills, release delays)."""
    from vantage_peers.domains.leases.globs import overlaps

    records, rows = result["records"], result["rows"]
    # 1. fencing order in the shared log
    high: dict[tuple[str, str], int] = defaultdict(int)
    uses = 0
    for rec in records:
        if rec[0] != "use":
            continue
        uses += 1
        _, kind, key, token, holder = rec
        if kind == "path":
            seen = max([high[("path", p)] for p in PATTERNS if overlaps(p, key)] + [0])
        else:
            seen = high[(kind, key)]
        assert token >= seen, f"{holder} used {kind} {key} with token {token} after token {seen}: two holders"
        high[(kind, key)] = max(high[(kind, key)], token)
    # 2. in the file: unique tokens, no overlapping holding intervals per exclusive key
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        fence = "*" if r["kind"] == "path" else r["key"]
        by_key[(r["kind"], fence)].append(r)
    for (kind, _fence), group in by_key.items():
        tokens = [r["fencingToken"] for r in group]
        assert len(tokens) == len(set(tokens)), f"duplicate fencing tokens for {kind}"
    for i, a in enumerate(rows):
        a_end = min(a["releasedAt"] or a["expiresAt"], a["expiresAt"])
        for b in rows[i + 1:]:
            if a["kind"] != b["kind"] or b["grantedAt"] >= a_end:
                continue
            same = a["key"] == b["key"] if a["kind"] != "path" else overlaps(a["key"], b["key"])
            if same and a["holder"] != b["holder"]:
                b_end = min(b["releasedAt"] or b["expiresAt"], b["expiresAt"])
                assert b_end <= a["grantedAt"] or b["grantedAt"] >= a_end, f"overlapping holders: {a['id']} {b['id']}"
    # 3. every lease of a killed holder released, never before its expiry, and by the first sweep at or
    # after its expiry whose transaction saw it (a worker's lazy expiry may come first)
    ticks = sorted(result["ticks"])
    delays = []
    for r in rows:
        holder = f"{r['holder']}/{r['holderInstance']}"
        if holder not in result["killed"]:
            continue
        assert r["releasedAt"] is not None, f"lease {r['id']} of killed {holder} never released"
        if r["releaseReason"] == "expired":
            assert r["releasedAt"] >= r["expiresAt"], f"lease {r['id']} released as expired before its expiry"
            first = next((t for t, seen in ticks if t >= r["expiresAt"] and r["id"] in seen), None)
            assert first is None or r["releasedAt"] <= first, (
                f"lease {r['id']} expired at {r['expiresAt']} but released at {r['releasedAt']} (tick {first})")
            delays.append(r["releasedAt"] - result["killed"][holder])
    grants = sum(1 for rec in records if rec[0] == "grant")
    return {"grants": grants, "uses": uses, "kills": len(result["killed"]), "expired": len(delays),
            "deathToReleaseMs": sorted(delays)}
