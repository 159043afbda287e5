"""Keyword ranker quality: porter stemming, stopwords, exact identifiers, the token cap, the FTS
migration (006) on a file made by the previous version, `fields="lite"`, and the fusion itself."""

from __future__ import annotations

import math

import pytest
from conftest import make_settings, open_tools

from vantage_peers.db import Database, latest_version, migrate
from vantage_peers.search.fts import MAX_TOKENS, fts_query
from vantage_peers.search.fusion import convex
from vantage_peers.server import create_app

pytestmark = pytest.mark.backends  # each test runs on SQLite and on PostgreSQL (#25)

NS = "project/quality"


def put(tools, content: str, namespace: str = NS, type: str = "fact") -> str:
    return tools.call("store_memory", namespace=namespace, type=type, content=content, createdBy="t")["memoryId"]


def ids(found) -> list[str]:
    return [h["_id"] for h in found["items"]]


def test_stemming_matches_deploy_deployed_deployment(tools):
    a = put(tools, "We deploy on Tuesdays")
    b = put(tools, "The API was deployed yesterday")
    c = put(tools, "Deployment failed on the staging cluster")
    put(tools, "Lunch is at noon")
    for query in ("deploy", "deployed", "deployment", "deploying"):
        assert set(ids(tools.call("text_search", query=query))) == {a, b, c}, query
    # A stem group inside an all-words query (FTS5 needs an explicit AND after a group).
    assert ids(tools.call("text_search", query="deployment failed staging")) == [c]
    assert ids(tools.call("text_search", query="failed deploy")) == [c]


def test_stopwords_do_not_rank(tools):
    pg = put(tools, "Acme runs PostgreSQL 15 with pgvector for the product catalog.")
    clerk = put(tools, "Clerk middleware guards private pages; routes need authentication.")
    found = tools.call("text_search", query="how do we protect routes with authentication")
    assert found["match"] == "any" and ids(found) == [clerk]  # "with" alone no longer finds pg
    # The any-word list of the hybrid ranker drops them too; the all-words query keeps them.
    assert ids(tools.call("recall", query="how do we protect routes with authentication")) == [clerk]
    assert ids(tools.call("text_search", query="PostgreSQL with pgvector")) == [pg]
    # A question made only of stopwords still searches them (no silent empty answer).
    assert ids(tools.call("text_search", query="for the with")) == [pg]
    assert fts_query("the with of", "or") == '"the" OR "with" OR "of"'


def test_exact_identifiers_still_match_exactly(tools):
    sha = "3f9a2c1e7b4d5a6e8f0b1c2d3e4f5a6b7c8d9e0f"
    m_sha = put(tools, f"Regression introduced by commit {sha} in the billing worker")
    put(tools, "Regression introduced by commit 3f9a2c1e7b4d5a6e8f0b1c2d3e4f5a6b7c8d9e0e elsewhere")
    m_path = put(tools, "The guard lives in src/app/middleware.ts next to the layout")
    put(tools, "Our app uses a middleware layer; see src/lib/auth.ts")
    m_snake = put(tools, "Rotate user_session_token every hour")
    put(tools, "The session expired for one user; token refresh failed")
    m_design = put(tools, "Namespace with a stemmable tail", namespace="project/designed")
    other = put(tools, "memory pointing at another memory")
    assert ids(tools.call("text_search", query=sha)) == [m_sha]
    assert ids(tools.call("text_search", query=sha[:12])) == []  # a token matches whole, not as a prefix
    assert ids(tools.call("text_search", query="src/app/middleware.ts")) == [m_path]
    assert ids(tools.call("text_search", query="user_session_token")) == [m_snake]
    assert ids(tools.call("text_search", query=other)) == []  # an id is not content...
    ref = put(tools, f"see {other} for the history")
    assert ids(tools.call("text_search", query=other)) == [ref]  # ...until some content holds it
    # Namespace keys are FTS tokens too: exact and prefix scopes survive stemming.
    assert ids(tools.call("text_search", query="stemmable", namespace="project/designed")) == [m_design]
    assert ids(tools.call("text_search", query="stemmable", namespace="project/*")) == [m_design]
    assert ids(tools.call("text_search", query="stemmable", namespace="project/design")) == []


def test_long_queries_are_not_cut_silently(tools):
    target = put(tools, "zebra unicorn")
    words = [f"w{i}x" for i in range(MAX_TOKENS + 40)]
    found = tools.call("text_search", query=" ".join(words[:100] + ["zebra"]))  # beyond the old 32-token cap
    assert ids(found) == [target] and "queryTruncated" not in found
    cut = tools.call("recall", query=" ".join(words + ["zebra"]))
    assert ids(cut) == [] and str(MAX_TOKENS) in cut["queryTruncated"]


def test_lite_fields_fit_100_hits_in_one_envelope(tools):
    body = "incident postmortem " + " ".join(f"detail{j}" for j in range(150))  # ≈1.3 KB each
    made = {put(tools, f"{body} {i}") for i in range(100)}
    full = tools.call("recall", query="incident postmortem", limit=100)
    assert full.get("truncated") and len(full["items"]) < 100
    lite = tools.call("recall", query="incident postmortem", limit=100, fields="lite")
    assert "truncated" not in lite and set(ids(lite)) == made
    item = lite["items"][0]
    assert set(item) == {"_id", "namespace", "type", "score", "snippet", "preview",
                         "matchedBy", "matchedTerms", "date"}  # #20: hits explain themselves
    assert item["matchedBy"] == ["keyword"] and item["matchedTerms"] == ["incident", "postmortem"]
    assert len(item["preview"]) == 161 and item["preview"].endswith("…")
    assert len(tools.call("text_search", query="postmortem", limit=100, fields="lite")["items"]) == 100
    assert "INVALID_ARGUMENT" in tools.error("recall", query="x", fields="tiny") or "fields" in tools.error(
        "recall", query="x", fields="tiny")


def _ndcg(ranked: list[str], relevant: dict[str, int], k: int = 3) -> float:
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(relevant.values(), reverse=True)[:k]))
    return dcg / ideal


def test_convex_fusion_is_never_below_the_better_single_ranker_on_a_fixture():
    # Four queries, each ranker right on two of them: keyword finds the exact codes, vector the
    # paraphrases. Scores are what BM25 (-bm25) and cosine similarity return.
    cases = [
        ({"keyword": [("d4", 9.1), ("d2", 1.2), ("d7", 1.1)], "vector": [("d1", .42), ("d4", .40), ("d3", .38)]},
         {"d4": 2}),
        ({"keyword": [("d8", 7.5), ("d5", 1.0)], "vector": [("d6", .35), ("d8", .34), ("d5", .33)]}, {"d8": 2}),
        ({"keyword": [("d2", 1.3), ("d3", 1.2), ("d1", 1.1)], "vector": [("d1", .61), ("d3", .22), ("d2", .20)]},
         {"d1": 2}),
        ({"keyword": [("d9", 2.0)], "vector": [("d5", .55), ("d9", .30), ("d6", .28)]}, {"d5": 2, "d9": 1}),
    ]
    totals = {"keyword": 0.0, "vector": 0.0, "fused": 0.0}
    for lists, relevant in cases:
        for name in ("keyword", "vector"):
            totals[name] += _ndcg([k for k, _ in lists[name]], relevant)
        totals["fused"] += _ndcg([f.key for f in convex(lists)], relevant)
    assert totals["fused"] >= max(totals["keyword"], totals["vector"])
    assert totals["fused"] > max(totals["keyword"], totals["vector"])  # and here strictly above both
    one = convex({"keyword": [("a", 3.0), ("b", 2.0)], "vector": []})
    assert [f.key for f in one] == ["a", "b"] and one[0].ranks == {"keyword": 1}
    assert convex({}) == [] and [f.key for f in convex({"v": [("x", 1.0), ("x", 0.5)]})] == ["x"]


def test_migration_006_rebuilds_every_fts_index_of_a_version_5_file(db_path):
    db = Database(db_path)
    assert migrate(db, target=5) == 5

    def fill(c) -> None:
        for i in range(30):
            c.execute("INSERT INTO memories (id, namespace, type, content, createdBy, createdAt, updatedAt) "
                      "VALUES (?, ?, 'fact', ?, 't', ?, ?)", (f"mem_{i}", NS, f"service {i} deployed to prod", i, i))
            c.execute("INSERT INTO messages (id, sender, channel, content, createdAt) VALUES (?, 'a', 'c', ?, ?)",
                      (f"msg_{i}", f"we deployed build {i}", i))
            c.execute("INSERT INTO tasks (id, title, description, assignedTo, priority, status, createdBy, createdAt, "
                      "updatedAt) VALUES (?, ?, 'deployments pending', 'a', 'medium', 'todo', 'a', ?, ?)",
                      (f"tsk_{i}", f"task {i}", i, i))
            c.execute("INSERT INTO briefingNotes (id, title, topic, participants, content, createdBy, createdAt, "
                      "updatedAt) VALUES (?, 'note', 'ops', '[]', 'deploying weekly', 'a', ?, ?)", (f"brf_{i}", i, i))
            c.execute("INSERT INTO fixPatterns (id, symptom, rootCause, tags, stack, sourceProject, createdBy, "
                      "createdAt, updatedAt) VALUES (?, 'deploys hang', 'lock', '[]', '[]', 'p', 'a', ?, ?)",
                      (f"fxp_{i}", i, i))

    db.write(fill)
    tables = {"memories": "memories_fts", "messages": "messages_fts", "tasks": "tasks_fts",
              "briefingNotes": "briefingNotes_fts", "fixPatterns": "fixPatterns_fts"}
    before = {t: db.read(lambda c, t=t: c.scalar(f"SELECT count(*) FROM {t}")) for t in tables}
    assert db.read(lambda c: c.scalar("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'deploy'")) == 0
    db.close()

    db = Database(db_path)
    assert migrate(db) == latest_version() >= 6
    for table, fts in tables.items():
        assert db.read(lambda c, t=table: c.scalar(f"SELECT count(*) FROM {t}")) == before[table] == 30
        sql = db.read(lambda c, f=fts: c.scalar("SELECT sql FROM sqlite_master WHERE name = ?", (f,)))
        assert "porter unicode61 remove_diacritics 2" in sql
        db.write(lambda c, f=fts: c.execute(f"INSERT INTO {f} ({f}) VALUES ('integrity-check')"))
        match = fts_query("deploy")  # "deploy" OR "deployment": porter's two stems of the family
        assert db.read(lambda c, f=fts, m=match: c.scalar(f"SELECT count(*) FROM {f} WHERE {f} MATCH ?", (m,))) == 30, fts
    db.close()
    # The triggers still keep the rebuilt indexes in step, through the tools.
    app = create_app(make_settings(db_path))
    try:
        with open_tools(app) as tools:
            assert len(tools.call("text_search", query="deploy", namespace=NS, limit=100)["items"]) == 30
            new = put(tools, "a redeployment is scheduled")
            assert new in ids(tools.call("text_search", query="redeployment"))
    finally:
        app.db.close()


def test_lite_fields_on_episode_and_fix_pattern_searches(tools):
    from support.fix_patterns_helpers import seed

    target = seed(tools)
    found = tools.call("search_fix_patterns", query="datastore rollout", fields="lite")
    assert found["items"][0]["_id"] == target
    assert set(found["items"][0]) == {"_id", "sourceProject", "score", "snippet", "validated", "preview"}
    tools.call("store_episode", namespace=NS, context="prod outage", goal="restore", action="rolled back",
               outcome="restored", insight="canary first", severity="high", createdBy="t")
    for tool in ("search_episodes_by_keyword", "search_episodes_by_semantic"):
        hits = tools.call(tool, query="outage", fields="lite")["items"]
        assert len(hits) == 1 and set(hits[0]) <= {"_id", "namespace", "type", "score", "snippet", "preview",
                                                   "matchedBy", "matchedTerms", "date"}
        assert hits[0]["type"] == "episode" and "Context: prod outage" in hits[0]["preview"]
