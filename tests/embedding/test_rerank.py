"""Optional reranking of recall (#35): off by default; with VP_RERANK_MODEL the fused top-k is
reordered by a cross-encoder (a tiny one built in the test that favours one word)."""

from __future__ import annotations

import statistics
import time
from importlib import resources

import pytest
from conftest import make_settings, open_tools
from support.tiny_onnx import cross_encoder
from tokenizers import Tokenizer

from vantage_peers.core.errors import InvalidArgument
from vantage_peers.embedding import local
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
