"""Schema-driven fuzz over every registered tool, over the wire (our stdio transport, raw JSON-RPC):
every reply is a result, or an error whose message starts with an UPPER_SNAKE code (after the SDK's
'Error executing tool X: ' prefix), or a JSON-RPC error; never silence.

`VP_FUZZ_CASES` (cases per tool, default 10) runs it longer; benchmarks/fuzz.py is the 10,000-call run.
"""

from __future__ import annotations

import os
import random

from conftest import make_settings
from support.fuzz_cases import run_fuzz

from vantage_peers.server import create_app

PER_CALL_BOUND_S = 120  # a hang detector only: far above any call's cost on a loaded CI machine


def test_every_tool_answers_hostile_arguments_with_a_result_or_a_code(tmp_path):
    per_tool = int(os.environ.get("VP_FUZZ_CASES", "10"))
    rng = random.Random(int(os.environ.get("VP_FUZZ_SEED", "8")))
    app = create_app(make_settings(tmp_path / "fuzz.db", orchestrator="fuzzer", instance_id="fuzzer-1"))
    bad: list[str] = []
    try:
        counts = run_fuzz(app, per_tool, rng, PER_CALL_BOUND_S, bad.append)
        print("fuzz class counts:", counts)
        assert sum(counts.values()) == per_tool * len(app.tools)
        # The file is still sound after all that.
        assert app.db.conn.scalar("PRAGMA integrity_check") == "ok"
        assert app.db.conn.query("PRAGMA foreign_key_check") == []
    finally:
        app.db.close()
    assert not bad, "\n".join(bad[:40])
    assert counts.get("ok", 0) > 0 and counts.get("INVALID_ARGUMENT", 0) > 0
