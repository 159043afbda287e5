"""Long schema-driven fuzz: >= 10,000 hostile tool calls over the wire (our stdio transport).

Every registered tool gets calls generated from its inputSchema (see tests/support/fuzz_cases.py). Prints
the class counts: ok, each error code, JSON-RPC errors, and the two that must stay 0 — UNCODED
(an error without an UPPER_SNAKE code) and UNANSWERED (no reply within the bound).

Usage: uv run python benchmarks/fuzz.py [--calls 10000] [--seed 8]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from conftest import make_settings  # noqa: E402
from support.fuzz_cases import run_fuzz  # noqa: E402

from vantage_peers.server import create_app  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=8)
    args = parser.parse_args()
    bad: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(make_settings(Path(tmp) / "fuzz.db", orchestrator="fuzzer", instance_id="fuzzer-1"))
        per_tool = math.ceil(args.calls / len(app.tools))
        start = time.monotonic()
        counts = run_fuzz(app, per_tool, random.Random(args.seed), 120, bad.append)
        took = time.monotonic() - start
        integrity = app.db.conn.scalar("PRAGMA integrity_check")
        app.db.close()
    total = sum(counts.values())
    print(f"{total} calls over {len(app.tools)} tools in {took:.0f} s ({per_tool} per tool)")
    for code, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"  {code:28} {n}")
    print(f"  uncoded errors: {counts.get('UNCODED', 0)}  unanswered: {counts.get('UNANSWERED', 0)}  "
          f"internal errors: {counts.get('INTERNAL_ERROR', 0)}  integrity_check: {integrity}")
    for line in bad[:30]:
        print("  BAD", line[:300])
    return 1 if bad or integrity != "ok" else 0


if __name__ == "__main__":
    sys.exit(main())
