"""Search on PostgreSQL (#25): BM25 over tsvector side tables ranks like FTS5, hostile text stays
text, the search budget cuts a slow query without breaking the read, and pgvector tables follow
their source rows (search/pg_fts.py, search/pg_vectors.py, db/pg/prelude.sql)."""

from __future__ import annotations

import multiprocessing
import time

import pytest
from conftest import open_tools
from support.memory_helpers import embedding_settings, run_embeddings
from support.records_helpers import HOSTILE_QUERIES
from support.tasks_helpers import task

from vantage_peers.db import open_database
from vantage_peers.db.busy import current_scope
from vantage_peers.domains.memory import indexer, vectors
from vantage_peers.search import budget, fts
from vantage_peers.search.keyword import keyword_rows
from vantage_peers.server import create_app

pytestmark = pytest.mark.backends  # the `[sqlite]` half checks the same expectations hold there

NS = "proj/search"

# Texts chosen to exercise what differs between tokenizers: stems, diacritics, ids, hex, punctuation.
CORPUS = [
    "The deployment of PR-1234 failed after the rollback",
    "deploying tsk_01ABC to production now; deploys are slow",
    "Ünïcode café résumé naïve coöperation",
    "the the the the of of and deployment",
    "PR 1234 was merged by alice into main",
    "sha 9f8e7d6c5b4a deadbeef build 1e5 v1.2.3 and 3.14",
    "A long text about databases, persistence and storage engines " * 20,
    "x'; DROP TABLE messages; -- \" OR 1=1 -- col:x* NEAR(a b) ^start",
    "running runner runs ran easily fairly",
    "emails like bob@example.com and https://example.com/path?q=1 are words too",
]
QUERIES = ["deploy", "deployment", "PR-1234", "tsk_01ABC", "cafe resume", "naive", "1234", "9f8e7d6c5b4a",
           "running", "run", "the", "databases storage", "example com", "bob", "v1 2 3", "1e5", "3 14",
           "DROP TABLE", '" OR 1=1', "col:x*", "NEAR(a b)", "^start", "coöperation", "rollback deploy PR",
           "nothing matches this", "alice main merged"]


def _messages(db, texts):
    now = int(time.time() * 1000)
    db.write(lambda c: c.executemany(
        "INSERT INTO messages (id, sender, channel, content, createdAt) VALUES (?, 'a', 'general', ?, ?)",
        [(f"m{i:02d}", text, now) for i, text in enumerate(texts)]))


def _ranked(db, query, mode):
    match = fts.fts_query(query, mode)
    if match is None:
        return []
    return [(r["id"], r["rank"]) for r in db.read(lambda c: keyword_rows(
        c, fts="messages_fts", table="messages", match=match, limit=50, columns="d.id"))]


def test_bm25_ranks_like_fts5_on_both_backends(settings, tmp_path, backend):
    """The same rows, in the same order, with the same BM25 scores as FTS5 (the SQLite file)."""
    if backend == "sqlite":
        pytest.skip("compares PostgreSQL against SQLite: runs once, in the [postgres] half")
    pg = open_database(settings)
    lite = open_database(settings.model_copy(update={"database_url": None, "db_path": tmp_path / "ref.db"}))
    try:
        _messages(pg, CORPUS)
        _messages(lite, CORPUS)
        compared = 0
        for query in QUERIES:
            for mode in ("and", "or"):
                want, got = _ranked(lite, query, mode), _ranked(pg, query, mode)
                assert [i for i, _ in got] == [i for i, _ in want], (query, mode, got, want)
                for (_, a), (_, b) in zip(got, want, strict=True):
                    assert a == pytest.approx(b, rel=1e-9, abs=1e-9), (query, mode, got, want)
                compared += len(want)
        assert compared > 40  # the corpus does match: the comparison is not vacuous
    finally:
        pg.close()
        lite.close()


def test_a_one_hit_exact_identifier_ranks_first(tools):
    filler = [f"deploy notes {i}: the PR was reviewed and the task moved on" for i in range(30)]
    for text in filler:
        tools.call("store_memory", namespace=NS, type="note", content=text, createdBy="s")
    targets = {
        "tsk_01HZX9QK": "blocked by tsk_01HZX9QK until the migration lands",
        "PR-1234": "PR-1234 reverts the retry change",
        "deadbeef42": "the crash is in build deadbeef42",
    }
    ids = {q: tools.call("store_memory", namespace=NS, type="note", content=t, createdBy="s")["memoryId"]
           for q, t in targets.items()}
    for query, mid in ids.items():
        for tool in ("text_search", "recall"):
            items = tools.call(tool, query=query, namespace=NS)["items"]
            assert items and items[0]["_id"] == mid, (tool, query, items[:2])
        # Among a longer question the identifier still decides.
        items = tools.call("recall", query=f"what happened with {query} yesterday", namespace=NS)["items"]
        assert items[0]["_id"] == mid


def test_namespaces_scope_the_keyword_search(tools):
    a = tools.call("store_memory", namespace="team/a", type="note", content="zebra crossing", createdBy="s")["memoryId"]
    b = tools.call("store_memory", namespace="team/b", type="note", content="zebra crossing", createdBy="s")["memoryId"]
    tools.call("store_memory", namespace="other", type="note", content="zebra crossing", createdBy="s")
    assert [h["_id"] for h in tools.call("text_search", query="zebra", namespace="team/a")["items"]] == [a]
    both = {h["_id"] for h in tools.call("text_search", query="zebra", namespace="team/*")["items"]}
    assert both == {a, b}
    assert len(tools.call("text_search", query="zebra")["items"]) == 3


@pytest.mark.parametrize("query", [*HOSTILE_QUERIES, "'; DROP TABLE memories_fts; --", "a:*B & !c", "\\'x",
                                   "<-> | & ! :*", "x" * 3000, "word " * 400])
def test_hostile_queries_are_text_on_every_search(tools, query):
    mid = tools.call("store_memory", namespace=NS, type="note", createdBy="s",
                     content="ordinary words: a:*B & !c <-> | and x" * 2)["memoryId"]
    tools.call("send_message", **{"from": "alice", "content": "a:*B & !c | <->", "channel": "general"})
    if not query.strip() or "\x00" in query:
        return  # empty queries are refused as INVALID_ARGUMENT (test_search.py); NUL is the store's call
    for tool, args in (("text_search", {"namespace": NS}), ("recall", {"namespace": NS}),
                       ("hybrid_search", {}), ("search_messages_by_keyword", {}),
                       ("search_tasks_by_keyword", {}), ("search_briefing_notes_by_keyword", {}),
                       ("search_fix_patterns", {}), ("search_components", {}), ("search_episodes_by_keyword", {})):
        out = tools.call(tool, query=query, **args)
        assert isinstance(out["items"] if isinstance(out, dict) else out, list)
    assert tools.call("get_memory", memoryId=mid)["_id"] == mid


def test_every_store_search_finds_its_rows(tools):
    tools.call("send_message", **{"from": "alice", "content": "the kangaroo release is Friday", "channel": "general"})
    for i in range(5):
        task(tools, title=f"Routine task {i}", description="nothing to see")
    tid = task(tools, title="Investigate kangaroo timeouts", description="PR-77 made it worse")
    assert [m["content"] for m in tools.call("search_messages_by_keyword", query="kangaroo")["items"]] == [
        "the kangaroo release is Friday"]
    assert [t["_id"] for t in tools.call("search_tasks_by_keyword", query="PR-77")["items"]] == [tid]
    assert [t["_id"] for t in tools.call("search_tasks_by_keyword", query="timeout")["items"]] == [tid]  # stemmed
    assert len(tools.call("search_tasks_by_keyword", query="task")["items"]) == 5 + 0  # "Investigate…" has no "task"


def test_a_huge_text_of_distinct_words_is_stored_and_searchable(tools):
    # ~1 MB of distinct tokens: more than a tsvector holds, so the index keeps each column's start.
    words = " ".join(f"w{i:06d}x" for i in range(100_000))
    mid = tools.call("store_memory", namespace=NS, type="note", content=words[:1_000_000], createdBy="s")["memoryId"]
    assert [h["_id"] for h in tools.call("text_search", query="w000007x", namespace=NS)["items"]] == [mid]


def test_the_search_budget_cuts_a_slow_query_and_the_read_goes_on(db, backend):
    if backend == "sqlite":
        pytest.skip("SQLite's progress handler is tested in test_hardening.py")

    def slow(conn):
        with db.call_scope():
            scope = current_scope()
            scope.search_budget_ms = 50
            started = time.monotonic()
            rows = budget.query(conn, "SELECT pg_sleep(5) AS slept")
            cut = (rows, scope.truncated, time.monotonic() - started)
        return cut, conn.scalar("SELECT 41 + 1")  # the transaction is still usable

    (rows, truncated, took), after = db.read(slow)
    assert rows == [] and truncated is True and after == 42
    assert took < 4.5  # cancelled, not waited out (a bound far above 50 ms: no timing assertion)
    assert db.read(lambda c: c.scalar("SHOW statement_timeout")) == "0"  # the budget did not leak


# -- vectors ----------------------------------------------------------------------------------------
@pytest.fixture
def vapp(db_path, server, database_url):
    app = create_app(embedding_settings(db_path, server, database_url=database_url))
    yield app
    app.db.close()


def test_vectors_follow_their_memories(vapp, backend):
    with open_tools(vapp) as tools:
        car = tools.call("store_memory", namespace=NS, type="note", content="car maintenance", createdBy="s")
        db_ = tools.call("store_memory", namespace=NS, type="note", content="database tuning", createdBy="s")
        assert run_embeddings(vapp)["embedded"] == 2
        assert vapp.db.read(vectors.count) == 2
        found = tools.call("hybrid_search", query="automobile", namespace=NS)  # no shared keyword
        assert found["mode"] == "hybrid" and found["items"][0]["_id"] == car["memoryId"]
        assert "vector" in found["items"][0]["matchedBy"]
        if backend == "postgres":
            idx = vapp.db.read(lambda c: c.scalar(
                "SELECT indexdef FROM pg_indexes WHERE tablename = 'memories_vec' AND indexdef LIKE '%hnsw%'"))
            assert "vector_cosine_ops" in idx
        # A soft delete moves the vector's metadata (trigger): the memory is gone from vector search.
        tools.call("soft_delete_memory", memoryId=car["memoryId"])
        assert car["memoryId"] not in [h["_id"] for h in tools.call("hybrid_search", query="automobile",
                                                                     namespace=NS)["items"]]
        # A content change drops the stale vector (trigger); a hard delete drops the row's vector.
        seq = vapp.db.read(lambda c: c.scalar("SELECT seq FROM memories WHERE id = ?", (db_["memoryId"],)))
        vapp.db.write(lambda c: c.execute("UPDATE memories SET content = 'storage tuning' WHERE seq = ?", (seq,)))
        assert vapp.db.read(vectors.count) == 1
        vapp.db.write(lambda c: c.execute("DELETE FROM memories WHERE seq = ?", (seq,)))
        assert vapp.db.read(vectors.count) == 1  # only the soft-deleted car remains
        # reindex: the table, its triggers and the recorded model go; every row is queued again.
        assert vapp.db.write(lambda c: indexer.reset_all(c, vapp.corpora)) >= 1
        assert not vapp.db.read(vectors.table_exists)
        if backend == "postgres":
            assert vapp.db.read(lambda c: c.scalar(
                "SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'memories_vec%'")) == 0
        assert run_embeddings(vapp)["embedded"] >= 1 and vapp.db.read(vectors.table_exists)


def test_knn_filters_keep_k_results_and_skip_zero_vectors(vapp, backend):
    with open_tools(vapp) as tools:
        for i in range(60):
            tools.call("store_memory", namespace=NS, type="decision" if i % 3 == 0 else "note",
                       content=f"car fleet note {i}", createdBy="s")
        run_embeddings(vapp)
        hits = tools.call("hybrid_search", query="automobile", namespace=NS, type="decision", limit=20)["items"]
        assert len(hits) == 20 and all(h["type"] == "decision" for h in hits)
        from support.memory_helpers import embed_text

        now = int(time.time() * 1000)
        got = vapp.db.read(lambda c: vectors.knn(c, embed_text("car"), k=100, scope=None, types=None,
                                                 include_superseded=False, now=now))
        assert len(got) == 60 and [d for _, d in got] == sorted(d for _, d in got)
        assert vapp.db.read(lambda c: vectors.knn(c, [0.0] * 256, k=5, scope=None, types=None,
                                                  include_superseded=False, now=now)) == []


def _store_many(url: str, path: str, worker: int, count: int) -> None:
    from pathlib import Path

    from conftest import make_settings

    app = create_app(make_settings(Path(path), database_url=url))
    try:
        with open_tools(app) as tools:
            for i in range(count):
                tools.call("store_memory", namespace=NS, type="note", createdBy="s",
                           content=f"parallel writer{worker} item{i} shared words")
    finally:
        app.db.close()


@pytest.mark.slow
def test_processes_writing_at_once_keep_the_index_complete(database_url, db_path, tools):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_store_many, args=(database_url, str(db_path), w, 15)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert len(tools.call("text_search", query="shared", namespace=NS, limit=100)["items"]) == 45
    for w in range(3):
        for i in (0, 14):
            items = tools.call("text_search", query=f"writer{w} item{i}", namespace=NS)["items"]
            assert len(items) == 1 and f"writer{w} item{i} " in items[0]["content"]
