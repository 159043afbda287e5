"""What the #19 file guard costs per transaction: `db.write` / `db.read` of one small row with the
guard (device/inode of the file and the -shm checked on every write, reads every 300 ms + -shm
every time) and with it switched off, alternating rounds to even out machine noise.

Usage: uv run python benchmarks/fileguard_overhead.py [--n 3000] [--rounds 3]
Prints µs per write and per read, both ways; no targets are asserted.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from vantage_peers.db import Database, migrate


def timed(db: Database, n: int) -> tuple[float, float]:
    started = time.perf_counter()
    for i in range(n):
        db.write(lambda c, i=i: c.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('bench', ?)", (str(i),)))
    write_us = (time.perf_counter() - started) / n * 1e6
    started = time.perf_counter()
    for _ in range(n):
        db.read(lambda c: c.scalar("SELECT value FROM meta WHERE key = 'bench'"))
    return write_us, (time.perf_counter() - started) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(Path(tmp) / "bench.db")
        migrate(db)
        guard = db.guard
        on: list[tuple[float, float]] = []
        off: list[tuple[float, float]] = []
        for _ in range(args.rounds):
            db.guard = guard
            on.append(timed(db, args.n))
            db.guard = None
            off.append(timed(db, args.n))
        db.guard = guard
        db.close()
    best = lambda xs, k: min(x[k] for x in xs)  # noqa: E731 - the least disturbed round
    print(f"write: {best(on, 0):.1f} µs guarded vs {best(off, 0):.1f} µs unguarded "
          f"({best(on, 0) / best(off, 0):.2f}x); read: {best(on, 1):.1f} µs vs {best(off, 1):.1f} µs "
          f"({best(on, 1) / best(off, 1):.2f}x)")


if __name__ == "__main__":
    main()
