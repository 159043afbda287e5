"""The index knows its model (#35): each vector table records the model and dimension of its vectors,
nothing of another model is written into it or compared with it, and files made before the record
(schema version 22) carry the file-wide record over to their vector tables."""

from __future__ import annotations

import pytest
from conftest import open_tools
from support.memory_helpers import embedding_settings, run_embeddings

from vantage_peers.db import Database, migrate
from vantage_peers.domains.memory import vectors
from vantage_peers.server import create_app


def _put(tools, content: str) -> str:
    return tools.call("store_memory", namespace="n", type="note", content=content, createdBy="a")["memoryId"]


@pytest.mark.backends
def test_a_query_and_a_write_never_mix_two_models_even_without_the_file_record(eapp, etools, server, db_path,
                                                                               database_url):
    _put(etools, "the deploy key rotates monthly")
    run_embeddings(eapp)
    assert eapp.db.read(lambda c: vectors.table_model(c, vectors.MEMORIES)) == vectors.Recorded("fake-embed-1", 256)
    # the file-wide record is gone (a tool that rewrote `meta`, a hand edit): the table's own record still holds
    eapp.db.write(lambda c: c.execute("DELETE FROM meta WHERE key LIKE 'embedding.%'"))
    other = create_app(embedding_settings(db_path, server, embedding_model="fake-embed-2", database_url=database_url))
    try:
        with open_tools(other) as tools:
            _put(tools, "a memory written after the switch")
            result = run_embeddings(other)
            assert result["embedded"] == 0  # refused: not written into fake-embed-1's table
            assert other.db.read(vectors.count) == 1
            found = tools.call("recall", query="deploy key")
            assert found["mode"] == "keyword" and "fake-embed-1" in found["reason"]  # not compared either
    finally:
        other.db.close()


def test_a_file_from_before_the_record_carries_its_model_over(db_path):
    db = Database(db_path)
    try:
        migrate(db, target=22)
        db.write(lambda c: c.executemany("INSERT INTO meta (key, value) VALUES (?, ?)",
                                         [("embedding.model", "all-MiniLM-L6-v2-int8"), ("embedding.dimensions", "384")]))
        migrate(db)
        rows = db.read(lambda c: c.query("SELECT name, model, dimensions FROM vectorModels ORDER BY name"))
        assert [(r["name"], r["model"], r["dimensions"]) for r in rows] == [
            ("fixPatterns_vec", "all-MiniLM-L6-v2-int8", 384), ("memories_vec", "all-MiniLM-L6-v2-int8", 384)]
        assert db.read(lambda c: vectors.table_mismatch(c, vectors.MEMORIES, "other-model", 384))
    finally:
        db.close()


def test_a_file_with_no_vectors_yet_records_nothing(db_path):
    db = Database(db_path)
    try:
        migrate(db, target=22)
        migrate(db)
        assert db.read(lambda c: c.scalar("SELECT count(*) FROM vectorModels")) == 0
    finally:
        db.close()
