"""search_fix_patterns by meaning against the real OpenAI-compatible HTTP server of the memory tests,
its keyword fallback, and fix patterns in the shared embedding worker, reindex and doctor."""

from __future__ import annotations

import io

import pytest
from conftest import open_tools
from support.fix_patterns_helpers import QUERY, TARGET, create, seed
from support.memory_helpers import DIMS, MODEL, embedding_settings, run_embeddings

from vantage_peers.domains.fix_patterns.embedding import VEC
from vantage_peers.domains.memory import maintenance, vectors
from vantage_peers.domains.memory.services import services
from vantage_peers.server import create_app

pytestmark = pytest.mark.backends  # each test runs on SQLite and on PostgreSQL (#25)



def ids(found):
    return [h["_id"] for h in found["items"]]


def test_search_by_meaning_finds_a_pattern_sharing_no_keyword(eapp, etools, server):
    target = seed(etools)
    assert server.calls == 0  # creating patterns never touches the network
    assert run_embeddings(eapp) == {"embedded": 4, "failed": 0}  # the one scheduler job embeds them
    assert eapp.db.read(lambda c: vectors.count(c, VEC)) == 4 and eapp.db.read(vectors.count) == 0
    assert server.inputs[0] == TARGET["symptom"] + "\n" + TARGET["rootCause"]
    found = etools.call("search_fix_patterns", query=QUERY, limit=2, detail="full")
    assert found["mode"] == "hybrid" and "reason" not in found
    top = found["items"][0]
    assert top["_id"] == target and top["matchedBy"] == ["vector"] and top["ranks"] == {"vector": 1}
    assert top["similarity"] > 0.1
    assert top["rootCause"] == TARGET["rootCause"] and "snippet" not in top
    assert len(found["items"]) == 2 and found["items"][1]["score"] < top["score"]
    both = etools.call("search_fix_patterns", query="datastore database", detail="full")["items"][0]
    assert both["_id"] == target and both["matchedBy"] == ["keyword", "vector"]
    assert both["score"] > 0 and "[Datastore]" in both["snippet"]


def test_cross_project_by_default_and_project_filter(eapp, etools):
    mine = seed(etools, project="alpha")
    theirs = create(etools, sourceProject="beta", tags=[], stack=[], symptom="Storage entries lost on each ship",
                    rootCause="Duplicate migration runs")
    run_embeddings(eapp)
    everywhere = ids(etools.call("search_fix_patterns", query=QUERY, limit=2, detail="full"))
    assert set(everywhere) == {mine, theirs}
    only_beta = etools.call("search_fix_patterns", query=QUERY, project="beta", detail="full")
    assert ids(only_beta) == [theirs] and only_beta["mode"] == "hybrid"
    assert {h["sourceProject"] for h in etools.call("search_fix_patterns", query=QUERY, project="alpha", detail="full")["items"]} == {
        "alpha"}
    assert etools.call("search_fix_patterns", query=QUERY, project="gamma", detail="full")["items"] == []
    keyword = etools.call("search_fix_patterns", query="migration", project="beta", detail="full")
    assert ids(keyword) == [theirs]


def test_keyword_fallback_with_embeddings_off(app, tools):
    target = seed(tools)
    assert app.db.read(lambda c: c.scalar("SELECT count(*) FROM fixPatternEmbeddingJobs")) == 4  # kept for later
    found = tools.call("search_fix_patterns", query="rollout vanish", detail="full")
    assert found["mode"] == "keyword" and "embeddings are off" in found["reason"]
    assert ids(found) == [target] and found["items"][0]["matchedBy"] == ["keyword"]
    assert "[rollout]" in found["items"][0]["snippet"] or "[vanish]" in found["items"][0]["snippet"]
    assert tools.call("search_fix_patterns", query=QUERY, detail="full")["items"] == []  # no meaning without vectors
    assert dict(app.jobs)["embeddings"]()["skipped"] == "embeddings are off"


def test_keyword_fallback_before_embedding_and_when_the_endpoint_is_down(eapp, etools, server):
    target = seed(etools)
    early = etools.call("search_fix_patterns", query="pods migrations", detail="full")
    assert early["mode"] == "keyword" and "no fix pattern has been embedded yet" in early["reason"]
    assert ids(early) == [target]
    run_embeddings(eapp)
    late = create(etools, symptom="Pods restart in a loop", rootCause="Liveness probe too strict", tags=[], stack=[])
    mixed = etools.call("search_fix_patterns", query="pods", detail="full")  # hybrid; the unembedded one found by keyword
    by_id = {h["_id"]: h for h in mixed["items"]}
    assert mixed["mode"] == "hybrid" and by_id[late]["matchedBy"] == ["keyword"]
    assert by_id[target]["matchedBy"] == ["keyword", "vector"] and "similarity" not in by_id[late]
    server.stop()
    services(eapp)._cache.clear()
    down = etools.call("search_fix_patterns", query="pods", detail="full")
    assert down["mode"] == "keyword" and "unavailable" in down["reason"] and set(ids(down)) == {target, late}


def test_memories_embedded_but_no_fix_pattern_yet_is_keyword_mode(eapp, etools):
    etools.call("store_memory", namespace="global", type="note", content="a database note", createdBy="x")
    run_embeddings(eapp)
    target = create(etools, **TARGET, tags=[], stack=[])
    found = etools.call("search_fix_patterns", query="datastore", detail="full")
    assert found["mode"] == "keyword" and ids(found) == [target]
    assert etools.call("recall", query="database")["mode"] == "hybrid"  # memories unaffected


def test_stale_vector_is_dropped_and_re_embedded(eapp, etools):
    target = seed(etools)
    run_embeddings(eapp)
    eapp.db.write(lambda c: c.execute("UPDATE fixPatterns SET symptom = 'Sedan doors squeak', updatedAt = 1 "
                                      "WHERE id = ?", (target,)))
    assert eapp.db.read(lambda c: vectors.count(c, VEC)) == 3
    assert target not in ids(etools.call("search_fix_patterns", query="automobile", limit=1, detail="full"))
    assert run_embeddings(eapp) == {"embedded": 1, "failed": 0}
    assert ids(etools.call("search_fix_patterns", query="automobile", limit=1, detail="full")) == [target]
    eapp.db.write(lambda c: c.execute("DELETE FROM fixPatterns WHERE id = ?", (target,)))
    assert eapp.db.read(lambda c: vectors.count(c, VEC)) == 3


def test_one_job_embeds_memories_and_fix_patterns_and_reindex_covers_both(eapp, etools, server, db_path, backend):
    from vantage_peers.pipeline.scheduler import Scheduler

    etools.call("store_memory", namespace="global", type="note", content="a car memory", createdBy="x")
    seed(etools)
    assert Scheduler(eapp).run_once()["embeddings"] == {"embedded": 5, "failed": 0}
    out = io.StringIO()
    from vantage_peers.doctor import run_doctor

    assert run_doctor(eapp.settings, out=out) == 0
    assert f"on file: {MODEL} ({DIMS} dims, 5 vectors: 1 memories, 4 fix patterns)" in out.getvalue()
    changed = create_app(embedding_settings(db_path, server, embedding_model="fake-embed-2",
                                            database_url=eapp.settings.database_url))
    try:
        with open_tools(changed) as tools:
            found = tools.call("search_fix_patterns", query=QUERY, detail="full")
            assert found["mode"] == "keyword" and "reindex" in found["reason"]
            checks = {label: status for status, label, _ in maintenance.doctor_checks(changed.settings, changed.db, changed.corpora)}
            assert checks["embedding model"] == "FAIL"
            err = io.StringIO()
            assert maintenance.reindex(changed.settings, changed.db, corpora=changed.corpora, err=err) == 0
            assert "5/5" in err.getvalue() and "100%" in err.getvalue()
            assert changed.db.read(vectors.recorded).model == "fake-embed-2"
            assert changed.db.read(lambda c: vectors.count(c, VEC)) == 4 and changed.db.read(vectors.count) == 1
            assert tools.call("search_fix_patterns", query=QUERY, detail="full")["mode"] == "hybrid"
    finally:
        changed.db.close()


def test_queue_health_names_fix_patterns(eapp, etools, server):
    seed(etools)
    server.mode = "503"
    result = run_embeddings(eapp)
    assert result["failed"] == 4 and "503" in result["error"]
    checks = {label: (status, detail) for status, label, detail in maintenance.doctor_checks(eapp.settings, eapp.db, eapp.corpora)}
    status, detail = checks["embedding queue"]
    assert status == "WARN" and "4 fix patterns waiting" in detail and "503" in detail


def test_hybrid_search_hostile_queries(eapp, etools):
    from support.records_helpers import HOSTILE_QUERIES

    seed(etools)
    run_embeddings(eapp)
    for query in HOSTILE_QUERIES:
        if query.strip():
            found = etools.call("search_fix_patterns", query=query, limit=3, detail="full")
            assert found["mode"] == "hybrid" and len(found["items"]) <= 3, query
