"""`serve` replicas on one PostgreSQL (#31): calls/s and push notification latency for 1, 2 and 4
replicas.

For each replica count, on a fresh database of the embedded PostgreSQL (tests/support/postgres.py):
- notification latency: agent Y (bob) holds a push stream (GET /mcp, text/event-stream) on the last
  replica; agent X (alice) sends it a message through the first one (another replica when there are
  two or more) with a plain JSON-RPC POST; latency = from just before the POST to the
  `notifications/resources/updated` for vp://inbox/bob on Y's stream, p50/p95 over `--trials`;
  carol holds a stream on every replica and must hear nothing of bob's (wrong-identity count);
- throughput: 8 HTTP clients in 2 load processes (benchmarks/http_load.py, the "inbox" scenario:
  send_message / check_messages), spread over the replicas, for `--seconds`; calls/s = successful
  calls / seconds.
The load average is printed with each row: on a shared 2-core machine more replicas mostly share
the same two cores (and PostgreSQL's), so the curve says what replication costs, not what it buys.

Usage: uv run python benchmarks/replicas.py [--trials 50] [--seconds 8] [--replicas 1,2,4]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import http_load  # noqa: E402 - benchmarks/, beside this script
from support import postgres  # noqa: E402
from support.http_helpers import Serve, scoped_token  # noqa: E402
from support.push_helpers import Stream, call, profile  # noqa: E402


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def latency(replicas: list[Serve], trials: int) -> tuple[list[float], int]:
    """Send-to-notification times (s) across replicas, and bob notifications heard by carol."""
    first, last = replicas[0], replicas[-1]
    alice, bob, carol = (scoped_token(first, profile(who)) for who in ("alice", "bob", "carol"))
    y = Stream(last.url, bob)
    spies = [Stream(r.url, carol) for r in replicas]
    y.primed()
    for spy in spies:
        spy.primed()
    import httpx2

    times = []
    with httpx2.Client() as http:
        for n in range(trials + 3):  # 3 warm-up sends
            before = len(y.uris())
            started = time.monotonic()
            call(first.url, alice, "send_message", http, channel="bob", content=f"trial {n}", **{"from": "alice"})
            y.wait_for(lambda before=before: len(y.uris()) > before, timeout=60)
            if n >= 3:
                times.append(y.events[-1][0] - started)
    wrong = sum(1 for spy in spies for uri in spy.uris() if not uri.endswith("/carol"))
    for stream in (y, *spies):
        stream.close()
    return times, wrong


def throughput(replicas: list[Serve], seconds: float) -> float:
    urls = [r.url for r in replicas]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start_at = time.time() + 15  # spawned load processes import for seconds on a busy machine
    procs = [ctx.Process(target=http_load.run, args=(urls, p * 4, 4, seconds, start_at, out, "inbox"))
             for p in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join(30)
    ok = sum(r["ok"] for r in results)
    errors = sum(r["errors"] for r in results)
    if errors:
        print(f"  ({errors} failed calls)", file=sys.stderr)
    return ok / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--replicas", default="1,2,4")
    args = parser.parse_args()
    if why := postgres.available():
        sys.exit(why)
    rows = []
    for count in (int(c) for c in args.replicas.split(",")):
        url = postgres.fresh_database("bench")
        folder = Path(tempfile.mkdtemp(prefix="vp-replicas-"))
        env = {"VP_DATABASE_URL": url, "VP_EMBEDDINGS": "none"}
        replicas = []
        try:
            for n in range(count):
                replicas.append(Serve(folder / f"r{n}.db", env=env))
            times, wrong = latency(replicas, args.trials)
            load_latency = os.getloadavg()[0]
            rate = throughput(replicas, args.seconds)
            load_calls = os.getloadavg()[0]
        finally:
            for r in replicas:
                r.stop()
            postgres.drop_database(url)
        row = (count, rate, _pct(times, 0.5), _pct(times, 0.95), wrong, load_latency, load_calls)
        rows.append(row)
        print(f"{count} replica(s): {rate:.0f} calls/s, notification p50 {row[2]:.0f} ms p95 {row[3]:.0f} ms, "
              f"{wrong} to the wrong identity, load {load_latency:.1f} / {load_calls:.1f}", flush=True)
    print(f"\nreplicas.py on {os.cpu_count()} cores, one embedded PostgreSQL, {args.trials} trials, "
          f"{args.seconds:.0f} s of load")
    print("| replicas | calls/s (8 clients) | notification p50 | p95 | wrong identity | load avg (latency / calls) |")
    print("|---|---|---|---|---|---|")
    for count, rate, p50, p95, wrong, l1, l2 in rows:
        print(f"| {count} | {rate:.0f} | {p50:.0f} ms | {p95:.0f} ms | {wrong} | {l1:.1f} / {l2:.1f} |")


if __name__ == "__main__":
    main()
