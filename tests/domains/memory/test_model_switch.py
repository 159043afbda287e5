"""Switching the embedding model (#35): while `vantage-peers reindex` builds the new model's vectors
beside the index, recall keeps answering from the old model's vectors (the query embedded by the old
model); a killed reindex resumes; at the end the new vectors replace the old in one transaction. The
two models have different dimensions (256 / 128), so a query compared with the other model's vectors
would fail loudly on either backend."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from conftest import open_tools
from support.memory_helpers import MODEL, embedding_settings, kill_cli_reindex

from vantage_peers.domains.memory import indexer, maintenance, store, vectors
from vantage_peers.domains.memory.services import services
from vantage_peers.search import vector_switch
from vantage_peers.search.vectors import META_SOURCE
from vantage_peers.server import create_app

pytestmark = pytest.mark.backends

ROOT = Path(__file__).resolve().parents[3]
ROWS = 600
NEW = "fake-embed-2"


def _fill(app) -> str:
    def run(c) -> str:
        for i in range(ROWS):
            store.store_memory(c, namespace="n/switch", type="note", content=f"row {i} about topic {i % 17}",
                               created_by="t")
        return store.store_memory(c, namespace="n/switch", type="note", content="the sedan needs new tyres",
                                  created_by="t")["memoryId"]
    sedan = app.db.write(run)
    svc = services(app)
    indexer.embed_pending(app.db, svc.embedder, owner=svc.owner, corpora=app.corpora, budget_s=300, batch=256)
    assert app.db.read(vectors.count) == ROWS + 1
    return sedan


def _models(db) -> dict[str, tuple[str, int]]:
    return {r["name"]: (r["model"], int(r["dimensions"]))
            for r in db.read(lambda c: c.query("SELECT name, model, dimensions FROM vectorModels"))}


@pytest.mark.slow
def test_recall_uses_the_old_vectors_until_a_killed_switch_finishes(eapp, server, db_path, database_url):
    sedan = _fill(eapp)
    env = {**os.environ, "VP_DB_PATH": str(db_path), "VP_EMBEDDINGS": "openai", "OPENAI_API_KEY": server.api_key,
           "OPENAI_BASE_URL": server.url, "VP_EMBEDDING_MODEL": NEW, "VP_EMBEDDING_DIMENSIONS": "128",
           "VP_SCHEDULER": "0"}
    if database_url:
        env["VP_DATABASE_URL"] = database_url
    server.delay = 1.0  # each round of 256 takes a second: the kill lands between rounds
    out = kill_cli_reindex(env, f"256/{ROWS + 1}", str(ROOT))
    server.delay = 0.0
    assert f"256/{ROWS + 1}" in out, out

    changed = create_app(embedding_settings(db_path, server, embedding_model=NEW, embedding_dimensions=128,
                                            database_url=database_url))
    try:
        # half done: the index is still the old model's, the new vectors sit in the staged table
        assert _models(changed.db) == {"memories_vec": (MODEL, 256), "memories_vec_next": (NEW, 128)}
        staged = changed.db.read(lambda c: vectors.count(c, vectors.staged(vectors.MEMORIES)))
        assert 256 <= staged < ROWS + 1
        with open_tools(changed) as tools:
            sent = len(server.models)
            found = tools.call("recall", query="automobile", namespace="n/switch", detail="full")
            assert found["mode"] != "keyword", found
            assert MODEL in found["reason"] and NEW in found["reason"] and "switching" in found["reason"]
            hit = next(i for i in found["items"] if i["_id"] == sedan)
            assert hit["matchedBy"] == ["vector"]  # no shared word: the old model's vectors found it
            assert server.models[sent:] == [MODEL]  # the query was embedded by the old model only

            checks = maintenance.doctor_checks(changed.settings, changed.db)
            index = [d for _, label, d in checks if label == "index"]
            assert index == [f"{MODEL} (switching to {NEW}: {staged} of {ROWS + 1} embedded; "
                             "run `vantage-peers reindex` to finish)"], checks

            # the old model cannot be rebuilt here (its source is unknown): keyword results, saying why
            fresh = create_app(changed.settings)
            try:
                changed.db.write(lambda c: c.execute("DELETE FROM meta WHERE key = ?",
                                                     (META_SOURCE + MODEL,)))
                with open_tools(fresh) as other:
                    alone = other.call("recall", query="automobile", namespace="n/switch")
                assert alone["mode"] == "keyword" and "cannot be loaded here" in alone["reason"], alone
            finally:
                fresh.db.close()

            # a query vector of the new model is never compared with the old index, nor the reverse
            new_q = vectors.QueryVector([1.0] * 128, NEW)
            old_q = vectors.QueryVector([1.0] * 256, MODEL)
            assert changed.db.read(lambda c: vectors.nearest(c, vectors.MEMORIES, new_q, k=5)) == []
            staged_table = vectors.staged(vectors.MEMORIES)
            assert changed.db.read(lambda c: vectors.nearest(c, staged_table, old_q, k=5)) == []

            # resumed in this process: only what the killed run had not stored is embedded
            err = io.StringIO()
            assert maintenance.reindex(changed.settings, changed.db, err=err) == 0
            assert "resuming, " in err.getvalue() and f"{ROWS + 1}/{ROWS + 1}" in err.getvalue()
            assert _models(changed.db) == {"memories_vec": (NEW, 128)}  # swapped: the old vectors are gone
            assert changed.db.read(vectors.count) == ROWS + 1
            assert not changed.db.read(lambda c: vectors.table_exists(c, staged_table))
            assert changed.db.read(lambda c: vector_switch.progress(c, changed.corpora)) is None
            assert changed.db.read(vectors.recorded) == vectors.Recorded(NEW, 128)

            sent = len(server.models)
            found = tools.call("recall", query="automobile", namespace="n/switch", detail="full")
            assert found["mode"] != "keyword" and "reason" not in found, found
            assert any(i["_id"] == sedan and i["matchedBy"] == ["vector"] for i in found["items"])
            assert server.models[sent:] == [NEW]  # after the swap, only the new model embeds queries
            assert changed.db.read(lambda c: vectors.nearest(c, vectors.MEMORIES, old_q, k=5)) == []
    finally:
        changed.db.close()


def test_a_switch_completes_when_the_worker_drains_the_queue(eapp, server, db_path, database_url):
    """Without the CLI: once a switch is begun, the server's own worker fills the staged table and
    swaps it in when nothing is left; a memory written meanwhile lands in the new index."""
    def few(c) -> None:
        for i in range(5):
            store.store_memory(c, namespace="n/switch", type="note", content=f"note {i}", created_by="t")
    eapp.db.write(few)
    svc = services(eapp)
    indexer.embed_pending(eapp.db, svc.embedder, owner=svc.owner, corpora=eapp.corpora)
    changed = create_app(embedding_settings(db_path, server, embedding_model=NEW, embedding_dimensions=128,
                                            database_url=database_url))
    try:
        tables = [c.vec for c in changed.corpora]
        changed.db.write(lambda c: (vector_switch.begin(c, tables, NEW), indexer.queue_all(c, changed.corpora)))
        changed.db.write(lambda c: store.store_memory(c, namespace="n/switch", type="note", content="written during",
                                                      created_by="t"))
        assert _models(changed.db)["memories_vec"] == (MODEL, 256)
        new_svc = services(changed)
        result = indexer.embed_pending(changed.db, new_svc.embedder, owner=new_svc.owner, corpora=changed.corpora)
        assert result["embedded"] == 6 and result["switched"] is True
        assert _models(changed.db) == {"memories_vec": (NEW, 128)}
        assert changed.db.read(vectors.count) == 6
    finally:
        changed.db.close()
