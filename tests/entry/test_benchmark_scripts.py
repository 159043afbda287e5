"""The #34 benchmark scripts still run (at toy sizes) and print the figures they promise: a script
that breaks when a module it borrows from moves (status_big.py used startup.py's `_status`, gone
since `status` stopped building the app) reports nothing at all. Nothing here asserts on time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # several server processes each

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("script", "args", "expected"), [
    ("status_big.py", ["--rows", "200", "--runs", "1"], ["floor cold start", "status (200 rows, warm)"]),
    ("calls.py", ["--calls", "20", "--rounds", "1"], ["send_message", "check_messages", "checkout_task"]),
    ("recall_backends.py", ["--memories", "300", "--queries", "5", "--backends", "sqlite"],
     ["recall p50", "text_search p50", "knn recall@10"]),
    ("answer_sizes.py", [], ["recall", "list_missions"]),
])
def test_a_benchmark_script_runs_and_prints_its_figures(tmp_path, script, args, expected):
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    for label in expected:
        assert label in done.stdout, (label, done.stdout[-2000:])
