"""`vantage-peers reindex` (#34/#35): progress output (items, rate, ETA), resumed after SIGKILL without
re-embedding what was done (the local model's batches: tests/embedding/test_batches.py)."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest
from support.memory_helpers import MODEL, embedding_settings, kill_cli_reindex

from vantage_peers.db import Database
from vantage_peers.domains.memory import maintenance, store, vectors

ROOT = Path(__file__).resolve().parents[3]
ROWS = 600  # three rounds of maintenance.REINDEX_BATCH


def _fill(db: Database, n: int) -> None:
    def run(c) -> None:
        for i in range(n):
            store.store_memory(c, namespace="n/reindex", type="note", content=f"row {i} about topic {i % 17}",
                               created_by="t")
    db.write(run)


@pytest.mark.slow
def test_reindex_killed_mid_run_resumes_without_re_embedding(db_path, server, db):
    _fill(db, ROWS)
    server.delay = 1.0  # each round of 256 takes a second: the kill lands between rounds
    env = {**os.environ, "VP_DB_PATH": str(db_path), "VP_EMBEDDINGS": "openai", "OPENAI_API_KEY": server.api_key,
           "OPENAI_BASE_URL": server.url, "VP_EMBEDDING_MODEL": MODEL, "VP_SCHEDULER": "0"}
    out = kill_cli_reindex(env, f"256/{ROWS}", str(ROOT))
    assert f"0/{ROWS}" in out and f"256/{ROWS}" in out and "docs/s" in out, out  # items and rate shown
    done = db.read(vectors.count)
    assert 256 <= done < ROWS
    # the round the killed process had in flight is still answered by the server: let it land first
    deadline = time.monotonic() + 60
    while len(server.inputs) < min(ROWS, 256 * server.calls) and time.monotonic() < deadline:
        time.sleep(0.05)
    sent_before = len(server.inputs)

    server.delay = 0.0
    err = io.StringIO()
    settings = embedding_settings(db_path, server)
    assert maintenance.reindex(settings, db, err=err) == 0
    assert f"resuming, {done} of {ROWS}" in err.getvalue() and f"{ROWS}/{ROWS}" in err.getvalue()
    assert db.read(vectors.count) == ROWS
    assert len(server.inputs) - sent_before == ROWS - done  # nothing embedded twice
    # finished: the next reindex starts over (a deliberate full rebuild)
    assert db.read(lambda c: c.scalar("SELECT value FROM meta WHERE key = ?", (maintenance.REINDEX_MARK,))) is None
