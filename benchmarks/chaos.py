"""Long kill -9 chaos / soak run on one shared DB file, in WAL and in delete mode.

Several server processes (the full tool layer) send messages, store memories, race to check out
tasks and mark receipts read while the parent SIGKILLs a random one every fraction of a second.
Prints, per mode: ops (acknowledged operations), kills, lost, duplicated, double claims, and the
file checks (integrity_check, FTS5 integrity-check, foreign_key_check).

Usage: uv run python benchmarks/chaos.py [--seconds 180] [--workers 4] [--modes wal,delete]
Target: lost = duplicated = double claims = 0 and every check ok, with >= 100 kills per mode.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support import chaos  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=180)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--modes", default="wal,delete")
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--kill-min", type=float, default=0.2)
    parser.add_argument("--kill-max", type=float, default=1.2)
    args = parser.parse_args()
    failed = False
    for mode in args.modes.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.monotonic()
            f = chaos.run(Path(tmp) / "chaos.db", mode=mode, workers=args.workers, seconds=args.seconds,
                          tasks=args.tasks, kill_every=(args.kill_min, args.kill_max))
            took = time.monotonic() - start
        print(f"[{mode}] {args.workers} servers, {f['seconds']:.0f} s of chaos ({took:.0f} s with start-up and checks)")
        print(f"  ops (acknowledged): {f['ops']}  (messages {f['messages']}, memories {f['memories']}, "
              f"claims {f['claims']})")
        print(f"  kills: {f['kills']}  process starts: {f['starts']}")
        print(f"  lost: {f['lost']}  duplicated: {f['duplicated']}  double claims: {f['double_claims']}  "
              f"owner mismatches: {f['owner_mismatch']}  bad receipts: {f['bad_receipts']}  "
              f"acked memories missing from FTS: {f['not_in_fts']}")
        print(f"  integrity_check: {f['integrity']}  FTS integrity-check failures: {f['fts_integrity_failures']}  "
              f"foreign_key_check violations: {f['foreign_key_violations']}")
        print(f"  error replies by code: {f['errors']}")
        bad = any(f[k] for k in ("lost", "duplicated", "double_claims", "owner_mismatch", "bad_receipts",
                                 "not_in_fts", "foreign_key_violations", "fts_integrity_failures"))
        failed = failed or bad or f["integrity"] != "ok" or "UNCODED" in f["errors"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
