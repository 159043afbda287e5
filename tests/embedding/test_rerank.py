"""Optional reranking of recall (#35): off by default; with VP_RERANK_MODEL the fused top-k is
reordered by a cross-encoder (a tiny one built in the test that favours one word)."""

from __future__ import annotations

import hashlib
import statistics
import time
from importlib import resources

import pytest
from conftest import make_settings, open_tools
from support.fake_hub import FakeHub
from support.tiny_onnx import cross_encoder
from tokenizers import Tokenizer

from vantage_peers.core.errors import InvalidArgument
from vantage_peers.embedding import catalogue, local, rerank
from vantage_peers.embedding.catalogue import Entry
from vantage_peers.embedding.rerank import CrossEncoder
from vantage_peers.pipeline.settings import Settings
from vantage_peers.server import create_app

TOKENIZER = resources.files("vantage_peers.embedding").joinpath("data", local.TOKENIZER).read_text(encoding="utf-8")


@pytest.fixture
def model(tmp_path):
    tok = Tokenizer.from_str(TOKENIZER)
    return cross_encoder(tmp_path / "tiny-rerank", TOKENIZER, [tok.token_to_id("lunch")], tok.get_vocab_size())


def test_the_tiny_cross_encoder_scores_pairs(model):
    scores = CrossEncoder(model).score("what about food", ["a note on leases", "lunch on Friday", "lunch lunch"])
    assert scores == [0.0, 1.0, 2.0]


def test_recall_is_reordered_by_the_reranker_only_when_configured(model, db_path, sqlite_template):
    from conftest import _from_template

    texts = ["team meeting notes", "team meeting notes about the budget",
             "team meeting notes covering the roadmap, hiring, the office move, the release calendar, "
             "and afterwards everyone went out for lunch"]
    plain = make_settings(db_path)
    _from_template(plain, sqlite_template)
    app = create_app(plain)
    try:
        with open_tools(app) as tools:
            ids = [tools.call("store_memory", namespace="n", type="note", content=t, createdBy="a")["memoryId"]
                   for t in texts]
            before = [i["_id"] for i in tools.call("recall", query="team meeting notes")["items"]]
            assert before[0] != ids[2]  # BM25 alone does not favour the lunch note
    finally:
        app.db.close()
    reranked = create_app(plain.model_copy(update={"rerank_model": str(model), "rerank_top_k": 30}))
    try:
        with open_tools(reranked) as tools:
            after = [i["_id"] for i in tools.call("recall", query="team meeting notes")["items"]]
            assert after[0] == ids[2] and sorted(after) == sorted(before)
            hybrid = [i["_id"] for i in tools.call("hybrid_search", query="team meeting notes")["items"]]
            assert hybrid == before  # recall only
            samples = []
            for _ in range(20):
                start = time.perf_counter()
                tools.call("recall", query="team meeting notes")
                samples.append(time.perf_counter() - start)
            print(f"recall with the tiny reranker: p50 {1000 * statistics.median(samples):.1f} ms")
    finally:
        reranked.db.close()


def test_the_setting_wants_a_folder(tmp_path):
    with pytest.raises(InvalidArgument, match="VP_RERANK_MODEL"):
        Settings.from_env({"VP_RERANK_MODEL": str(tmp_path / "missing")}, dotenv=False)
    assert Settings.from_env({}, dotenv=False).rerank_model is None  # off by default


TEXTS = ["team meeting notes", "team meeting notes about the budget",
         "team meeting notes covering the roadmap, hiring, the office move, the release calendar, "
         "and afterwards everyone went out for lunch"]


def _recall_order(settings) -> tuple[list[str], list[str]]:
    """(the stored ids in TEXTS order, recall's order for "team meeting notes")."""
    app = create_app(settings)
    try:
        with open_tools(app) as tools:
            ids = [tools.call("store_memory", namespace="n", type="note", content=t, createdBy="a")["memoryId"]
                   for t in TEXTS]
            return ids, [i["_id"] for i in tools.call("recall", query="team meeting notes")["items"]]
    finally:
        app.db.close()


@pytest.mark.parametrize("good", [True, False], ids=["pinned-hash", "hash-mismatch"])
def test_a_named_reranker_is_fetched_at_its_commit_and_a_refused_one_keeps_the_fused_order(
        model, tmp_path, monkeypatch, good):
    """VP_RERANK_MODEL=<catalogue name>: the cross-encoder comes from the hub (a loopback stand-in) at its
    pinned commit and checked by SHA-256; refused (MODEL_HASH_MISMATCH), recall still answers, unreranked."""
    graph = (model / "model.onnx").read_bytes()
    commit = "a" * 40
    hub = FakeHub("test/rerank", {commit: {"onnx/model_quantized.onnx": graph,
                                            "tokenizer.json": (model / "tokenizer.json").read_bytes()}}, {})
    try:
        pinned = hashlib.sha256(graph).hexdigest() if good else "0" * 64
        monkeypatch.setattr(catalogue, "RERANKERS", {"tiny-rerank": Entry(
            "tiny-rerank", "test/rerank", commit, {"onnx/model_quantized.onnx": pinned, "tokenizer.json": None},
            1, "logit", "MIT", 1)})
        monkeypatch.setattr(rerank, "_cache", {})
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("VP_MODEL_CACHE", str(tmp_path / "cache"))
        settings = Settings.from_env({"VP_RERANK_MODEL": "tiny-rerank", "VP_DB_PATH": str(tmp_path / "vp.db"),
                                      "VP_EMBEDDINGS": "none", "VP_SCHEDULER": "off"}, dotenv=False)
        assert settings.rerank_model == "tiny-rerank"
        ids, order = _recall_order(settings)
        assert sorted(order) == sorted(ids)
        assert (order[0] == ids[2]) is good  # reranked by the fetched model, or the fused order kept
        assert all(p.startswith(f"/test/rerank/resolve/{commit}/") for _, p in hub.requests if "/resolve/" in p)
    finally:
        hub.stop()


def test_the_setting_names_the_catalogue_rerankers(tmp_path):
    with pytest.raises(InvalidArgument, match="ms-marco-MiniLM-L-6-v2"):
        Settings.from_env({"VP_RERANK_MODEL": "no-such-reranker"}, dotenv=False)
    assert Settings.from_env({"VP_RERANK_MODEL": "ms-marco-MiniLM-L-6-v2"}, dotenv=False).rerank_model \
        == "ms-marco-MiniLM-L-6-v2"


def test_doctor_reports_the_reranker(model, tmp_path, monkeypatch):
    from vantage_peers.domains.memory.maintenance import _reranker_line

    monkeypatch.setenv("VP_MODEL_CACHE", str(tmp_path / "empty-cache"))
    assert _reranker_line(None) is None
    assert _reranker_line(str(model))[0] == "ok"
    assert _reranker_line(str(tmp_path))[0] == "FAIL"  # a folder without the files
    status, _, detail = _reranker_line("ms-marco-MiniLM-L-6-v2")
    assert status == "WARN" and "not downloaded yet" in detail and "model_quantized.onnx" in detail
