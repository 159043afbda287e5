"""The embedding pipeline against a real OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import io
import multiprocessing

import pytest
from conftest import open_tools
from support.memory_helpers import (
    API_KEY,
    DIMS,
    MODEL,
    child_embed,
    embedding_settings,
    run_embeddings,
)

from vantage_peers.domains.memory import indexer, maintenance, vectors
from vantage_peers.domains.memory.services import services
from vantage_peers.server import create_app


def put(tools, content, namespace="project/cars", type="note"):
    return tools.call("store_memory", namespace=namespace, type=type, content=content, createdBy="sigma")["memoryId"]


def count(app, sql):
    return app.db.read(lambda c: c.scalar(sql))


def test_writes_never_touch_the_network_and_the_job_embeds_in_one_batch(eapp, etools, server):
    texts = ["first memory about apples", "second memory about pears", "third memory about plums"]
    for text in texts:
        put(etools, text)
    assert server.calls == 0  # store_memory only enqueued
    assert count(eapp, "SELECT count(*) FROM embeddingJobs") == 3
    result = run_embeddings(eapp)
    assert result == {"embedded": 3, "failed": 0}
    assert server.calls == 1 and server.inputs == texts and server.auth_failures == 0
    assert server.models == [MODEL]
    assert count(eapp, "SELECT count(*) FROM embeddingJobs") == 0
    rec = eapp.db.read(vectors.recorded)
    assert rec == vectors.Recorded(MODEL, DIMS) and eapp.db.read(vectors.count) == 3
    assert run_embeddings(eapp) == {"embedded": 0, "failed": 0}


def test_wrong_api_key_is_refused_and_jobs_are_kept(db_path, server):
    app = create_app(embedding_settings(db_path, server))  # the client sends API_KEY...
    server.api_key = "another-key"  # ...which the server no longer accepts
    try:
        with open_tools(app) as tools:
            put(tools, "a memory about kiwis")
            result = run_embeddings(app)
            assert result["failed"] == 1 and "401" in result["error"]
            assert server.auth_failures >= 1
            job = app.db.read(lambda c: c.one("SELECT attempts, lastError, leaseOwner FROM embeddingJobs"))
            assert job["attempts"] == 1 and "401" in job["lastError"] and job["leaseOwner"] is None
            found = tools.call("recall", query="kiwis")
            assert found["mode"] == "keyword" and len(found["items"]) == 1
    finally:
        app.db.close()


def test_semantic_query_finds_a_memory_sharing_no_keyword(eapp, etools):
    target = put(etools, "The automobile needs new tyres before the trip")
    for text in ["The kitchen sink is leaking again", "Quarterly budget review moved to Friday",
                 "Remember to water the office plants", "Invoice numbers restart every January"]:
        put(etools, text)
    run_embeddings(eapp)
    assert etools.call("text_search", query="car", namespace="project/cars")["items"] == []
    found = etools.call("recall", query="car", namespace="project/cars", limit=3, detail="full")
    assert found["mode"] == "hybrid"
    top = found["items"][0]
    assert top["_id"] == target and top["matchedBy"] == ["vector"] and top["ranks"] == {"vector": 1}
    assert top["similarity"] > 0.1 and top["score"] > found["items"][1]["score"]  # z-score fusion
    both = etools.call("hybrid_search", query="automobile tyres", namespace="project/cars", detail="full")["items"][0]
    assert both["_id"] == target and both["matchedBy"] == ["keyword", "vector"]
    assert both["score"] > 0 and "[automobile]" in both["snippet"]
    # Namespaces are isolated in the vector ranker too.
    assert etools.call("recall", query="car", namespace="project/other")["items"] == []
    assert etools.call("recall", query="car", namespace="project/*")["items"][0]["_id"] == target


def test_type_filters_and_supersession_apply_to_vectors(eapp, etools):
    old = put(etools, "The sedan is parked in bay four", type="fact")
    put(etools, "Buy a new automobile next year", type="decision")
    run_embeddings(eapp)
    facts = etools.call("recall", query="car", type="fact")["items"]
    assert [i["_id"] for i in facts] == [old]
    etools.call("soft_delete_memory", memoryId=old)
    assert etools.call("recall", query="car", type="fact")["items"] == []
    assert [i["_id"] for i in etools.call("recall", query="car", type="fact", includeSuperseded=True)["items"]] == [old]
    row = eapp.db.read(lambda c: c.one(f"SELECT isLatest FROM {vectors.TABLE} WHERE rowid = "
                                       "(SELECT seq FROM memories WHERE id = ?)", (old,)))
    assert row["isLatest"] == 0  # the trigger kept the vector's metadata in step


def test_endpoint_down_mid_run_loses_nothing_and_jobs_are_retried(eapp, etools, server):
    first = [put(etools, f"batch one vehicle note {i}") for i in range(5)]
    assert run_embeddings(eapp)["embedded"] == 5
    server.mode = "503"
    second = [put(etools, f"batch two vehicle note {i}") for i in range(5)]
    result = run_embeddings(eapp)
    assert result["embedded"] == 0 and result["failed"] == 5 and "503" in result["error"]
    server.stop()  # now the port refuses connections altogether
    third = [put(etools, f"batch three vehicle note {i}") for i in range(3)]
    later = indexer.now_ms() + 3_600_000
    result = run_embeddings(eapp, now=lambda: later)
    assert result["failed"] == 8 and result["embedded"] == 0
    attempts = eapp.db.read(lambda c: c.query("SELECT attempts FROM embeddingJobs ORDER BY memorySeq"))
    assert [a["attempts"] for a in attempts] == [2] * 5 + [1] * 3
    # Every memory is stored and found by keyword meanwhile; recall says why it is keyword-only.
    listed = etools.call("list_memories", namespace="project/cars", limit=200)["items"]
    assert {m["_id"] for m in listed} == set(first + second + third)
    down = etools.call("recall", query="vehicle note", limit=20)
    assert down["mode"] == "keyword" and "unavailable" in down["reason"] and len(down["items"]) == 13
    # The endpoint comes back on the same port: the backlog is embedded, nothing twice.
    server.mode = "ok"
    server.start()
    services(eapp)._down_until = 0.0  # skip the query breaker's cool-down instead of sleeping
    assert run_embeddings(eapp)["embedded"] == 0  # still backing off: not due yet
    result = run_embeddings(eapp, now=lambda: later + 86_400_000)
    assert result == {"embedded": 8, "failed": 0}
    assert eapp.db.read(vectors.count) == 13 and count(eapp, "SELECT count(*) FROM embeddingJobs") == 0
    assert sorted(server.inputs) == sorted(f"batch {b} vehicle note {i}" for b, n in
                                           (("one", 5), ("two", 5), ("three", 3)) for i in range(n))
    assert etools.call("recall", query="vehicle note")["mode"] == "hybrid"


def test_a_hung_endpoint_times_the_query_out_to_keyword_mode(eapp, etools, server):
    target = put(etools, "The sedan needs a service")
    run_embeddings(eapp)
    svc = services(eapp)
    svc.query_timeout = 0.2
    server.delay = 1.0
    calls = server.calls
    found = etools.call("recall", query="sedan service")
    assert found["mode"] == "keyword" and "unavailable" in found["reason"] and "Timeout" in found["reason"]
    assert [i["_id"] for i in found["items"]] == [target]
    # The breaker keeps the next queries off the dead endpoint instead of waiting each time.
    again = etools.call("hybrid_search", query="sedan")
    assert again["mode"] == "keyword" and "retrying shortly" in again["reason"]
    assert server.calls == calls + 1
    server.delay = 0.0


def test_one_refused_item_does_not_block_its_batch(eapp, etools, server):
    server.mode = "400-on:poison"
    for text in ["fine one", "fine two", "poison pill", "fine three"]:
        put(etools, text)
    result = run_embeddings(eapp)
    assert result["embedded"] == 3 and result["failed"] == 1 and "error" not in result
    job = eapp.db.read(lambda c: c.one("SELECT m.content, j.attempts, j.lastError FROM embeddingJobs j "
                                       "JOIN memories m ON m.seq = j.memorySeq"))
    assert job["content"] == "poison pill" and job["attempts"] == 1 and "400" in job["lastError"]


def test_long_non_ascii_and_badly_tokenizing_memories_still_get_a_vector(eapp, etools, server):
    server.max_input_bytes = 8_191  # as many tokens as text-embedding-3-* accept, counted pessimistically
    texts = ["汉字" * 10_000, "🦘" * 5_000, "é" * 20_000, "0123456789abcdef" * 1_800, "short plain note"]
    for text in texts:
        put(etools, text)
    result = run_embeddings(eapp)
    assert result["embedded"] == 5 and result["failed"] == 0
    assert count(eapp, "SELECT count(*) FROM embeddingJobs") == 0 and eapp.db.read(vectors.count) == 5
    assert all(len(text.encode()) <= 8_191 for text in server.inputs)
    # Non-ASCII text is cut by its estimated token cost up front; only the hex blob needed a retry.
    assert sum(1 for text in server.inputs if text.startswith("0123")) == 1


def test_leases_split_jobs_between_workers(eapp, etools):
    for i in range(10):
        put(etools, f"lease test {i}")
    now = indexer.now_ms()
    a = eapp.db.write(lambda c: indexer.claim(c, owner="A", now=now, limit=6))
    b = eapp.db.write(lambda c: indexer.claim(c, owner="B", now=now, limit=6))
    assert len(a) == 6 and len(b) == 4 and not {j["seq"] for j in a} & {j["seq"] for j in b}
    assert eapp.db.write(lambda c: indexer.claim(c, owner="C", now=now, limit=6)) == []
    # A lease that ran out (its worker died) is taken over.
    again = eapp.db.write(lambda c: indexer.claim(c, owner="C", now=now + indexer.LEASE_MS + 1, limit=20))
    assert len(again) == 10


@pytest.mark.slow
def test_two_processes_embed_the_queue_cooperatively(eapp, etools, server, db_path):
    texts = [f"cooperative memory {i}" for i in range(48)]
    for text in texts:
        put(etools, text)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        results = pool.starmap(child_embed, [(str(db_path), server.url, "w1"), (str(db_path), server.url, "w2")])
    assert sum(r["embedded"] for r in results) == 48
    assert sorted(server.inputs) == sorted(texts)  # every memory embedded exactly once
    assert eapp.db.read(vectors.count) == 48


def test_episodes_semantic_search(eapp, etools):
    ep = etools.call("store_episode", namespace="orchestrator/alice", createdBy="alice",
                     context="Shipping the new build", goal="Rollout without downtime", action="Blue/green switch",
                     outcome="Zero downtime", insight="Always keep the previous release warm", severity="major")
    etools.call("store_episode", namespace="orchestrator/alice", createdBy="alice", context="Kitchen",
                goal="Coffee", action="Brew", outcome="Coffee", insight="Grind finer", severity="minor")
    put(etools, "deploy checklist is in the wiki", namespace="orchestrator/alice")  # not an episode
    run_embeddings(eapp)
    found = etools.call("search_episodes_by_semantic", query="deploy", namespace="orchestrator/alice", detail="full")
    assert found["mode"] == "semantic"
    assert found["items"][0]["_id"] == ep["memoryId"] and found["items"][0]["severity"] == "major"
    assert all(i["type"] == "episode" for i in found["items"])
    assert found["items"][0]["similarity"] >= found["items"][-1]["similarity"]


def test_model_change_is_detected_and_reindex_re_embeds(eapp, etools, server, db_path):
    for i in range(7):
        put(etools, f"reindex me {i}")
    run_embeddings(eapp)
    changed = create_app(embedding_settings(db_path, server, embedding_model="fake-embed-2"))
    try:
        with open_tools(changed) as tools:
            put(tools, "stored after the model change")
            result = run_embeddings(changed)
            assert "reindex" in result["skipped"] and result["embedded"] == 0
            found = tools.call("recall", query="reindex me")
            assert found["mode"] == "keyword" and "fake-embed-1" in found["reason"]
            checks = maintenance.doctor_checks(changed.settings, changed.db)
            assert ("FAIL", "embedding model") in [(s, label) for s, label, _ in checks]
            err = io.StringIO()
            assert maintenance.reindex(changed.settings, changed.db, err=err) == 0
            assert "8/8" in err.getvalue() and "100%" in err.getvalue() and "docs/s" in err.getvalue()
            assert changed.db.read(vectors.recorded).model == "fake-embed-2"
            assert changed.db.read(vectors.count) == 8
            assert tools.call("recall", query="reindex me")["mode"] == "hybrid"
            checks = maintenance.doctor_checks(changed.settings, changed.db)
            assert [s for s, _, _ in checks] == ["ok", "ok", "ok"]
            assert ("index model", "memories: fake-embed-2 (256 dims)") in [(label, d) for _, label, d in checks]
    finally:
        changed.db.close()


def test_dimension_change_is_a_mismatch(eapp, etools, server, db_path):
    put(etools, "dimension test")
    run_embeddings(eapp)
    smaller = create_app(embedding_settings(db_path, server, embedding_dimensions=16))
    try:
        assert "16 are configured" in run_embeddings(smaller)["skipped"]
    finally:
        smaller.db.close()


def test_reindex_reports_a_dead_endpoint_and_keeps_jobs(eapp, etools, server):
    put(etools, "will not embed")
    server.stop()
    err = io.StringIO()
    assert maintenance.reindex(eapp.settings, eapp.db, err=err, max_failures=2, pause=lambda s: None) == 1
    assert "keeps failing" in err.getvalue()
    assert count(eapp, "SELECT count(*) FROM embeddingJobs") == 1
    checks = dict(((label, status) for status, label, _ in maintenance.doctor_checks(eapp.settings, eapp.db)))
    assert checks["embedding endpoint"] == "FAIL" and checks["embedding queue"] == "WARN"


def test_reindex_refuses_when_embeddings_are_off(app):
    err = io.StringIO()
    assert maintenance.reindex(app.settings, app.db, err=err) == 2 and "embeddings are off" in err.getvalue()
    assert maintenance.doctor_checks(app.settings, app.db)[0][0] == "ok"


def test_doctor_prints_embedding_checks(eapp, etools, server):
    from vantage_peers.doctor import run_doctor

    put(etools, "doctor memory")
    run_embeddings(eapp)
    out = io.StringIO()
    assert run_doctor(eapp.settings, out=out) == 0
    text = out.getvalue()
    assert "embedding model: configured fake-embed-1; on file: fake-embed-1 (256 dims, 1 vectors)" in text
    assert "embedding endpoint: reachable, 256 dimensions" in text and API_KEY not in text


def test_scheduler_runs_the_registered_jobs(eapp, etools, server):
    from vantage_peers.pipeline.scheduler import Scheduler

    put(etools, "scheduled embedding")
    results = Scheduler(eapp).run_once()  # one tick, run directly (no thread, no sleeping)
    assert results["embeddings"] == {"embedded": 1, "failed": 0}
    assert results["memory-expiry"] == 0
    assert eapp.db.read(vectors.count) == 1


def test_embeddings_off_means_no_provider_and_no_worker(app, tools):
    put(tools, "no key configured")
    assert dict(app.jobs)["embeddings"]() == {"embedded": 0, "failed": 0, "skipped": "embeddings are off"}
    assert app.db.read(lambda c: c.scalar("SELECT count(*) FROM embeddingJobs")) == 1  # kept for later


def test_cli_reindex_shows_progress(eapp, etools, server, db_path, tmp_path, monkeypatch, capsys):
    from vantage_peers.cli import main

    for i in range(5):
        put(etools, f"cli reindex {i}")
    monkeypatch.chdir(tmp_path)  # no stray .env
    for key, value in {"VP_DB_PATH": str(db_path), "OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": server.url,
                       "VP_EMBEDDING_MODEL": MODEL, "VP_EMBEDDINGS": "openai"}.items():
        monkeypatch.setenv(key, value)
    assert main(["reindex"]) == 0
    err = capsys.readouterr().err
    # items, rate and ETA (tqdm's bar): from 0/5 to 5/5
    assert "reindex fake-embed-1:" in err and "0/5" in err and "5/5" in err and "100%" in err and "docs/s" in err
    assert eapp.db.read(vectors.count) == 5


def test_ai_gateway_variables_and_dimensions_reach_the_endpoint(db_path, server):
    from vantage_peers.pipeline.settings import Settings

    env = {"AI_GATEWAY_API_KEY": API_KEY, "AI_GATEWAY_BASE_URL": server.url, "VP_EMBEDDING_MODEL": MODEL,
           "VP_EMBEDDING_DIMENSIONS": "32", "VP_DB_PATH": str(db_path), "VP_SCHEDULER": "off"}
    app = create_app(Settings.from_env(env, dotenv=False))
    try:
        assert app.settings.embeddings == "openai"  # the gateway key alone turns embeddings on
        with open_tools(app) as tools:
            target = put(tools, "gateway automobile memory")
            assert run_embeddings(app) == {"embedded": 1, "failed": 0}
            assert server.auth_failures == 0 and app.db.read(vectors.recorded) == vectors.Recorded(MODEL, 32)
            found = tools.call("recall", query="car")
            assert found["mode"] == "hybrid" and found["items"][0]["_id"] == target
    finally:
        app.db.close()
