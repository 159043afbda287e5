"""Agents exchanging messages while they are SIGKILLed and restarted: nothing committed is lost.

Runs the crash phase of benchmarks/delivery.py briefly (VP_DELIVERY_SOAK_SECONDS for a longer run:
e.g. 120). Each agent is a separate OS process on the same file.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
from support.paths import REPO

pytestmark = pytest.mark.slow  # chaos: agents killed while messages are delivered



def load_bench():
    spec = importlib.util.spec_from_file_location("bench_delivery", REPO / "benchmarks" / "delivery.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_delivery_lost_while_agents_are_killed(tmp_path):
    bench = load_bench()
    seconds = float(os.environ.get("VP_DELIVERY_SOAK_SECONDS") or 6)
    out = bench.crash_run(str(tmp_path / "chaos.db"), 2, seconds, 2.0, 3.0, seed=11)
    assert out["sent"] > 0 and out["receipts"] > 0 and out["kills"] >= 1
    assert out["lost"] == 0, out["lostIds"]
    assert out["acknowledged"] > 0
    # Every dead letter told its sender exactly once (the job's own count agrees with the rows).
    assert out["deadLetterNotices"] == out["deadLettered"] == out["jobTotals"]["deadLettered"]
