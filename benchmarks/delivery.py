"""Delivery under crashes, and wake-up latency (issue #21).

Phase 1 — N agent processes (roles r0..r{R-1}, two instances each, plus a `ghost` role that never
runs) exchange messages on one file for --seconds: direct to one instance, to a role, broadcast,
and ackRequired (direct to one instance, or broadcast: those skip the stale `ghost`). Every agent reads its inbox, logs each delivery (receipt, attempt) to
its own file, acknowledges what asks for it and marks it read. Meanwhile the controller SIGKILLs a
random agent every --kill-every seconds and restarts it, and runs the redelivery job (scheduler
store function) twice a second with a short acknowledgement timeout (200 ms, doubling, 5 attempts).
Then a drain period without sends or kills, then every agent is stopped.

Counts (from the database and the delivery logs):
- sent: messages committed by agents; acknowledged: ackRequired receipts acknowledged;
- lost: receipts committed for a recipient that was running, never delivered to any of its
  instances (target 0);
- duplicated deliveries: the same receipt handed out again at the same attempt (a crash between
  reading and marking read, or two instances of a role reading one role receipt at once), and
  redeliveries (an ackRequired receipt handed out again because its acknowledgement did not come);
- dead-lettered: receipts out of attempts (those to `ghost` and some of a killed agent's).

Phase 2 — wake latency: a `vantage-peers wait` process per round; the controller commits a message
and measures until `wait` has printed its digest (p50 target ≤ 300 ms). Idle waiter CPU: one
`wait` left alone for --idle-seconds, CPU time from /proc (target ≤ 1%).

Usage: uv run python benchmarks/delivery.py [--roles 3] [--seconds 20] [--kill-every 3] [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ACK_TIMEOUT_MS = 200
MAX_ATTEMPTS = 5
DEAD_AFTER_MS = 5_000


def _db(path: str):
    from vantage_peers.db import Database

    return Database(path, busy_timeout_ms=10_000)


# -- one agent process -------------------------------------------------------------------------
def agent(path: str, role: str, inst: str, roles: list[str], logdir: str, seed: int) -> None:
    from vantage_peers.core.ids import now_ms
    from vantage_peers.domains.messaging import delivery, store
    from vantage_peers.domains.profiles import store as profiles

    rng = random.Random(seed)
    db = _db(path)
    sent_log = open(Path(logdir) / f"sent-{role}-{inst}.log", "a", buffering=1)  # noqa: SIM115
    got_log = open(Path(logdir) / f"got-{role}-{inst}.log", "a", buffering=1)  # noqa: SIM115
    stop_sending = Path(logdir) / "stop-sending"
    others = [r for r in roles if r != role] + ["ghost"]
    (Path(logdir) / f"ready-{role}-{inst}").touch()  # imports done: the controller starts its clock
    while True:
        db.write(lambda c: profiles.touch(c, orchestrator_id=role, instance_id=inst))
        if not stop_sending.exists() and rng.random() < 0.6:
            kind = rng.choice(("direct", "role", "broadcast", "ack", "ackBroadcast"))
            to = rng.choice(others)
            target = f"{rng.randrange(2)}" if kind in ("direct", "ack") and to != "ghost" else None

            def send(c, kind=kind, to=to, target=target):
                channel = "broadcast" if kind in ("broadcast", "ackBroadcast") else to
                sent = store.send_message(c, sender=role, channel=channel, content=f"{kind} from {role}/{inst}",
                                          from_instance_id=inst, instance_id=target)
                if kind in ("ack", "ackBroadcast"):
                    delivery.require_ack(c, message_id=sent["messageId"], timeout_ms=ACK_TIMEOUT_MS, now=now_ms(),
                                         dead_after_ms=DEAD_AFTER_MS, broadcast=kind == "ackBroadcast")
                return sent["messageId"]

            message_id = db.write(send)
            sent_log.write(f"{message_id} {kind}\n")
        rows = db.read(lambda c: store.check_messages(c, recipient=role, recipient_instance_id=inst, limit=50))
        for r in rows:
            got_log.write(f"{r['receiptId']} {r.get('deliveryAttempt', 1)}\n")
        acks = [r["receiptId"] for r in rows if r.get("ackRequired")]
        if acks:
            db.write(lambda c, acks=acks: delivery.acknowledge(c, caller=role, receipt_ids=acks, message_id=None,
                                                               note=None, now=now_ms()))
        if rows:
            ids = [r["receiptId"] for r in rows]
            db.write(lambda c, ids=ids: store.mark_as_read(c, receipt_ids=ids))
        time.sleep(0.02)


# -- phase 1 -------------------------------------------------------------------------------------
def crash_run(path: str, roles_n: int, seconds: float, kill_every: float, drain: float, seed: int = 7) -> dict:
    from vantage_peers.core.ids import now_ms
    from vantage_peers.db import migrate
    from vantage_peers.domains.messaging.delivery import redeliver_due
    from vantage_peers.domains.profiles import store as profiles

    db = _db(path)
    migrate(db)
    roles = [f"r{i}" for i in range(roles_n)]
    for who in [*roles, "ghost"]:
        db.write(lambda c, who=who: profiles.ensure_profile(c, who))
    logdir = tempfile.mkdtemp(prefix="vp-delivery-logs-")
    procs: dict[tuple[str, str], subprocess.Popen] = {}
    seeds = iter(range(1, 10**6))

    def start(role: str, inst: str) -> None:
        (Path(logdir) / f"ready-{role}-{inst}").unlink(missing_ok=True)  # re-signalled once started
        procs[(role, inst)] = subprocess.Popen(
            [sys.executable, __file__, "--agent", path, role, inst, ",".join(roles), logdir, str(next(seeds))],
            stdout=subprocess.DEVNULL, stderr=open(Path(logdir) / f"err-{role}-{inst}.log", "a"))  # noqa: SIM115

    for role in roles:
        for inst in ("0", "1"):
            start(role, inst)
    while len(list(Path(logdir).glob("ready-*"))) < len(procs):  # start-up is slow on a loaded machine
        time.sleep(0.1)
    rng = random.Random(seed)
    kills = 0
    job = {"redelivered": 0, "deadLettered": 0}
    end = time.monotonic() + seconds
    next_kill = time.monotonic() + kill_every
    drain_until = None  # the drain starts once every agent restarted by the last kill is running again
    while drain_until is None or time.monotonic() < drain_until:
        now = time.monotonic()
        if now >= end and not (Path(logdir) / "stop-sending").exists():
            (Path(logdir) / "stop-sending").touch()
        if now >= end and drain_until is None and len(list(Path(logdir).glob("ready-*"))) == len(procs):
            drain_until = now + drain
        if now < end and now >= next_kill:
            key = rng.choice(list(procs))
            procs[key].send_signal(signal.SIGKILL)
            procs[key].wait()
            kills += 1
            start(*key)
            next_kill = now + kill_every
        got = db.write(lambda c: redeliver_due(c, now=now_ms(), max_attempts=MAX_ATTEMPTS))
        for k in job:
            job[k] += got[k]
        time.sleep(0.5)
    for p in procs.values():
        p.send_signal(signal.SIGKILL)
        p.wait()

    delivered: dict[str, list[int]] = {}
    for f in Path(logdir).glob("got-*.log"):
        for line in f.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2:
                delivered.setdefault(parts[0], []).append(int(parts[1]))

    def stats(c):
        sent = c.scalar("SELECT count(*) FROM messages WHERE sender != 'system'")
        by_kind = {k: c.scalar("SELECT count(*) FROM messages WHERE sender != 'system' AND content LIKE ?",
                               (f"{k} from %",)) for k in ("direct", "role", "broadcast", "ack", "ackBroadcast")}
        receipts = c.query("SELECT id, recipient, ackRequired, ackedAt, deadLetteredAt, staleAtSend "
                           "FROM messageReceipts")
        return sent, by_kind, receipts

    sent, by_kind, receipts = db.read(stats)
    live = [r for r in receipts if r["recipient"] != "ghost"]
    notices = db.read(lambda c: c.scalar("SELECT count(*) FROM messages WHERE sender = 'system'"))
    lost = [r["id"] for r in live if r["id"] not in delivered]
    same_attempt_dups = sum(len(v) - len(set(v)) for v in delivered.values())
    redeliveries = sum(len(set(v)) - 1 for v in delivered.values())
    db.close()
    return {
        "agents": len(procs), "seconds": seconds, "kills": kills, "sent": sent, "byKind": by_kind,
        "receipts": len(receipts), "ackRequired": sum(r["ackRequired"] for r in receipts),
        "acknowledged": sum(1 for r in receipts if r["ackedAt"] is not None),
        "lost": len(lost), "lostIds": lost[:20], "duplicateDeliveries": same_attempt_dups, "redeliveries": redeliveries,
        "deadLettered": sum(1 for r in receipts if r["deadLetteredAt"] is not None),
        "deadLetteredLive": sum(1 for r in live if r["deadLetteredAt"] is not None),
        "skippedStale": sum(r["staleAtSend"] for r in receipts), "deadLetterNotices": notices, "jobTotals": job,
    }


# -- phase 2 -------------------------------------------------------------------------------------
def _cpu_seconds(pid: int) -> float:
    """CPU time of the process in seconds, to the nanosecond (schedstat) rather than the 10 ms tick."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _until_watching(pid: int, path: str) -> None:
    """Until the process has the database open (imports done), plus a margin for its first query."""
    real = os.path.realpath(path)
    while True:
        try:
            if any(os.path.realpath(f"/proc/{pid}/fd/{fd}") == real for fd in os.listdir(f"/proc/{pid}/fd")):
                break
        except OSError:
            pass
        time.sleep(0.05)
    time.sleep(1.0)


def wake_latency(path: str, rounds: int, idle_seconds: float) -> dict:
    from vantage_peers.db import migrate
    from vantage_peers.domains.messaging import store

    db = _db(path)
    migrate(db)
    env = {**os.environ, "VP_DB_PATH": path, "VP_ORCHESTRATOR": "waiter", "VP_EMBEDDINGS": "none"}
    cmd = [sys.executable, "-m", "vantage_peers.cli", "wait", "--for", "messages", "--timeout", "60"]
    state = Path(path).with_suffix(".state.json")
    latencies = []
    for i in range(rounds):
        # --state: what is new is what this file has not reported, so a commit that races the
        # waiter's start-up is still new to it (the measurement starts once it watches anyway).
        proc = subprocess.Popen([*cmd, "--state", str(state)], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        _until_watching(proc.pid, path)
        t0 = time.perf_counter()
        db.write(lambda c, i=i: store.send_message(c, sender="bench", channel="waiter", content=f"wake {i}"))
        proc.stdout.readline()  # the digest's first line: `wait` has seen the commit and queried it
        latencies.append((time.perf_counter() - t0) * 1000)
        proc.wait(30)
        db.write(lambda c: c.execute("UPDATE messageReceipts SET readAt = 1 WHERE recipient = 'waiter'"))
    idle = subprocess.Popen([*cmd[:-1], str(idle_seconds + 10)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _until_watching(idle.pid, path)  # past start-up (imports, migration check)
    c0, t0 = _cpu_seconds(idle.pid), time.monotonic()
    time.sleep(idle_seconds)
    c1, t1 = _cpu_seconds(idle.pid), time.monotonic()
    idle.send_signal(signal.SIGTERM)
    idle.wait()
    db.close()
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"rounds": rounds, "p50Ms": round(statistics.median(latencies), 1), "p95Ms": round(p95, 1),
            "maxMs": round(max(latencies), 1), "idleCpuPercent": round(100 * (c1 - c0) / (t1 - t0), 3), "idleSeconds": round(t1 - t0, 1)}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--agent":
        _, _, path, role, inst, roles, logdir, seed = sys.argv
        agent(path, role, inst, roles.split(","), logdir, int(seed))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--roles", type=int, default=3, help="roles, two agent processes each (default 3)")
    ap.add_argument("--seconds", type=float, default=20.0, help="send/kill phase (default 20)")
    ap.add_argument("--kill-every", type=float, default=3.0, help="seconds between SIGKILLs (default 3)")
    ap.add_argument("--drain", type=float, default=8.0, help="seconds without sends or kills at the end")
    ap.add_argument("--rounds", type=int, default=20, help="wake-latency rounds (default 20)")
    ap.add_argument("--idle-seconds", type=float, default=10.0, help="idle waiter CPU window (default 10)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        crash = crash_run(str(Path(tmp) / "crash.db"), args.roles, args.seconds, args.kill_every, args.drain)
        print("crash run:", json.dumps(crash, indent=2))
        wake = wake_latency(str(Path(tmp) / "wake.db"), args.rounds, args.idle_seconds)
        print("wake:", json.dumps(wake, indent=2))
        verdict = "PASS" if crash["lost"] == 0 and wake["p50Ms"] <= 300 and wake["idleCpuPercent"] <= 1 else "FAIL"
        print(f"targets (lost 0, wake p50 <= 300 ms, idle waiter CPU <= 1%): {verdict}")


if __name__ == "__main__":
    main()
