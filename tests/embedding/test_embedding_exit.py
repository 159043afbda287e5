"""#20: a short-lived process's memories get embedded, and `status` shows the embedding backlog."""

from __future__ import annotations

import io
import json
import os

import anyio
import pytest
from conftest import make_settings, open_tools
from mcp import Client, StdioServerParameters
from support.memory_helpers import embedding_settings
from support.paths import console_script as _script

from vantage_peers.db import Database
from vantage_peers.domains.memory import vectors
from vantage_peers.domains.memory.exit_flush import embed_before_exit
from vantage_peers.server import create_app
from vantage_peers.status import run_status


def _counts(path) -> tuple[int, int]:
    db = Database(str(path))
    try:
        return db.read(vectors.count), db.read(lambda c: c.scalar("SELECT count(*) FROM embeddingJobs"))
    finally:
        db.close()


@pytest.mark.slow
def test_a_one_shot_stdio_process_embeds_what_it_wrote_before_exiting(tmp_path, monkeypatch):
    # The SDK's client closes stdin, then kills the server after 2 s; the server embeds its backlog on
    # the way out, which on a loaded machine (loading the model included) takes longer: wait for it.
    monkeypatch.setattr("mcp.client.stdio.PROCESS_TERMINATION_TIMEOUT", 120.0)
    path = tmp_path / "oneshot.db"
    env = {**os.environ, "VP_DB_PATH": str(path), "VP_ORCHESTRATOR": "alice", "VP_EMBEDDINGS": "local",
           "VP_TICK_SECONDS": "3600"}
    env.pop("OPENAI_API_KEY", None)
    env.pop("OPENAI_BASE_URL", None)
    params = StdioServerParameters(command=_script(), args=[], env=env, cwd=str(tmp_path))

    async def main():
        async with Client(params) as client:  # store, then quit at once: a CLI-style client
            for text in ("The automobile needs new tyres", "Rotate the OKLCH palette tokens"):
                stored = await client.call_tool("store_memory", {"namespace": "project/cars", "type": "note",
                                                                 "content": text})
                assert not stored.is_error

    anyio.run(main)
    assert _counts(path) == (2, 0)  # both vectors written, no job left behind


def test_embed_before_exit_serves_every_corpus_and_keeps_jobs_when_the_endpoint_fails(db_path, server):
    app = create_app(embedding_settings(db_path, server))
    try:
        with open_tools(app) as tools:
            for i in range(3):
                tools.call("store_memory", namespace="p/x", type="note", content=f"car note {i}", createdBy="a")
            tools.call("create_fix_pattern", symptom="deploy fails", rootCause="stale cache",
                       sourceProject="p", createdBy="a")
        server.mode = "503"
        result = embed_before_exit(app)
        assert result["embedded"] == 0 and "503" in result["error"]
        assert app.db.read(lambda c: c.scalar("SELECT count(*) FROM embeddingJobs")) == 3  # kept for later
        server.mode = "ok"
        app.db.write(lambda c: c.execute("UPDATE embeddingJobs SET nextAttemptAt = 0"))
        app.db.write(lambda c: c.execute("UPDATE fixPatternEmbeddingJobs SET nextAttemptAt = 0"))
        assert embed_before_exit(app)["embedded"] == 4  # 3 memories and the fix pattern
        assert embed_before_exit(app) == {"embedded": 0, "failed": 0}  # nothing queued: returns at once
    finally:
        app.db.close()


def test_status_shows_the_embedding_backlog(db_path):
    app = create_app(make_settings(db_path))  # embeddings off: jobs queue up, nothing embeds them
    try:
        with open_tools(app) as tools:
            for i in range(5):
                tools.call("store_memory", namespace="p/x", type="note", content=f"note {i}", createdBy="a")
    finally:
        app.db.close()
    out = io.StringIO()
    assert run_status(make_settings(db_path), as_json=True, out=out) == 0
    backlog = json.loads(out.getvalue())["embeddingBacklog"]
    assert backlog["pending"] == 5 and backlog["byCorpus"] == {"memories": 5}
    out = io.StringIO()
    run_status(make_settings(db_path), out=out)
    assert "embedding backlog: 5 waiting (5 memories)" in out.getvalue()
