"""Bounded kill -9 chaos: server processes on one file, random SIGKILLs, then every invariant.

Small for CI by default; `VP_CHAOS_SECONDS` / `VP_CHAOS_WORKERS` run it long (benchmarks/chaos.py
prints the figures of a minutes-long run in both journal modes).
"""

from __future__ import annotations

import os

import pytest
from support import chaos


@pytest.mark.parametrize("mode", ["wal", "delete"])
def test_sigkilled_servers_lose_nothing_acknowledged(tmp_path, mode):
    seconds = float(os.environ.get("VP_CHAOS_SECONDS", "4"))
    workers = int(os.environ.get("VP_CHAOS_WORKERS", "3"))
    figures = chaos.run(tmp_path / "chaos.db", mode=mode, workers=workers, seconds=seconds, tasks=200,
                        kill_every=(0.2, 0.8), fork=False)  # pytest may hold threads: no fork()
    print(figures)
    assert figures["starts"] >= workers and figures["ops"] > 0, figures
    assert figures["kills"] >= 1, figures
    for key in ("lost", "duplicated", "double_claims", "owner_mismatch", "bad_receipts", "not_in_fts",
                "foreign_key_violations"):
        assert figures[key] == 0, (key, figures)
    assert figures["integrity"] == "ok" and figures["fts_integrity_failures"] == [], figures
    assert "UNCODED" not in figures["errors"] and "INTERNAL_ERROR" not in figures["errors"], figures
