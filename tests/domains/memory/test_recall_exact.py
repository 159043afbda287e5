"""#20: recall never loses the keyword hit, degenerate vectors never crash, hits explain themselves.

- The fusion keeps a one-hit keyword list (the codename case; the former z-score fusion flattened
  it to the floor and let the vector side alone decide).
- Identifiers (`tsk_…`, `PR-1234`, `OKLCH`, `snake_case_name`, a codename) are in the top 5 of
  `recall` with the local model on, among near-miss distractors the model sees as nearly identical.
- A zero query vector from a loopback OpenAI-compatible endpoint gives keyword results and a reason;
  a zero document vector is not stored and never breaks a search.
"""

from __future__ import annotations

import random

import pytest
from conftest import make_settings, open_tools
from support.memory_helpers import embedding_settings, run_embeddings

from vantage_peers.domains.memory import vectors
from vantage_peers.search.fusion import convex
from vantage_peers.server import create_app

pytestmark = pytest.mark.backends  # each test runs on SQLite and on PostgreSQL (#25)

NS = "project/exact"


def put(tools, content: str, namespace: str = NS) -> str:
    return tools.call("store_memory", namespace=namespace, type="note", content=content, createdBy="t")["memoryId"]


def test_a_single_keyword_hit_survives_fusion():
    # 40 vector candidates with a clear spread, the codename's memory far down among them.
    vector = [(f"v{i}", 0.80 - i * 0.01) for i in range(40)] + [("target", 0.30)]
    fused = [f.key for f in convex({"keyword": [("target", 7.5)], "vector": vector})]
    assert fused[0] == "target"  # the only document holding the word, first as BM25 puts it
    # Not in the vector list at all (beyond its depth): still first.
    fused = [f.key for f in convex({"keyword": [("target", 7.5)], "vector": vector[:40]})]
    assert fused[0] == "target"
    # Three exact hits keep at least their BM25 positions, in BM25 order.
    fused = [f.key for f in convex({"keyword": [("a", 9.0), ("b", 8.0), ("c", 1.0)], "vector": vector})]
    assert fused.index("a") <= 0 and fused.index("b") <= 1 and fused.index("c") <= 2


def test_a_no_spread_list_is_not_flattened_and_long_lists_fuse_as_before():
    # Equal BM25 scores: the listed items rank above every item the keyword ranker did not list.
    vector = [("x", 0.50), ("y", 0.49), ("a", 0.48), ("b", 0.47)]
    fused = convex({"keyword": [("a", 3.0), ("b", 3.0)], "vector": vector})
    assert [f.key for f in fused][:2] == ["a", "b"]
    # A long keyword list (common words) is fused by score: a clear vector winner still leads.
    keyword = [(f"k{i}", 10.0 - i * 0.1) for i in range(30)]
    vector = [("v", 0.95)] + [(f"k{i}", 0.30 - i * 0.001) for i in range(30)]
    assert convex({"keyword": keyword, "vector": vector})[0].key == "v"


def _handles(rng: random.Random) -> list[tuple[str, list[str]]]:
    """(handle, near-miss distractor handles) per identifier kind the issue names."""
    hexed = "".join(rng.choice("0123456789abcdef") for _ in range(12))
    return [
        (f"tsk_{hexed}", [f"tsk_{hexed[:6]}{''.join(rng.choice('0123456789abcdef') for _ in range(6))}"
                          for _ in range(4)]),
        ("PR-1234", ["PR-1233", "PR-1235", "PR-1243", "PR-2134"]),
        ("OKLCH", ["HSL", "LCH", "OKLAB", "sRGB"]),
        ("retry_budget_window", ["retry_budget_cursor", "retry_window_budget_x", "quota_budget_window",
                                 "retry_ledger_window"]),
        ("Quillmoor", ["Quillmere", "Tarragon", "Vexhollow", "Marrowind"]),
    ]


SENTENCES = ["{} fixed a race in the deploy pipeline ({}) after the incident on Tuesday.",
             "{} reviewed the colour tokens ({}) before the freeze.",
             "{} rewrote the webhook retries ({}) so the release can go out.",
             "{} documented the rate limiter ({}) as discussed in the planning call."]


SHORT = ["see {}", "{} noted", "{} again", "re {}", "{} done", "about {}"]


@pytest.mark.slow
def test_identifiers_stay_in_the_top_5_with_local_embeddings(db_path, database_url):
    rng = random.Random(20)
    app = create_app(make_settings(db_path, embeddings="local", database_url=database_url))
    try:
        with open_tools(app) as tools:
            targets = {}
            for handle, misses in _handles(rng):
                targets[handle] = put(tools, rng.choice(SENTENCES).format(rng.choice(["Ana", "Bo"]), handle))
                # Near-misses in short notes: nearer to the bare handle, for the model, than the
                # long sentence that really holds it.
                for miss in misses:
                    for note in SHORT:
                        put(tools, note.format(miss))
            assert run_embeddings(app)["embedded"] == 5 * (1 + 4 * len(SHORT))
            for handle, memory_id in targets.items():
                for tool in ("recall", "hybrid_search"):
                    found = tools.call(tool, query=handle, namespace=NS, limit=5, detail="full")
                    assert found["mode"] == "hybrid", found
                    top = [h["_id"] for h in found["items"]]
                    assert memory_id in top, (tool, handle, found["items"])
                    hit = found["items"][top.index(memory_id)]
                    assert "keyword" in hit["matchedBy"] and hit["matchedTerms"], hit
    finally:
        app.db.close()


def test_a_zero_query_vector_from_the_endpoint_gives_keyword_results(db_path, server, database_url):
    app = create_app(embedding_settings(db_path, server, database_url=database_url))
    try:
        with open_tools(app) as tools:
            target = put(tools, "The parser chokes on ((( in the billing template")
            put(tools, "Unrelated note about the deploy pipeline")
            assert run_embeddings(app)["embedded"] == 2
            server.zero_on = "((("
            for tool in ("recall", "hybrid_search"):
                found = tools.call(tool, query="((( billing", namespace=NS)
                assert found["mode"] == "keyword" and "zero vector" in found["reason"], found
                assert [h["_id"] for h in found["items"]] == [target]
                assert found["items"][0]["matchedBy"] == ["keyword"]
            # Lite hits explain themselves too: ranker, terms, and the memory's date.
            lite = tools.call("recall", query="((( billing", namespace=NS, fields="lite")["items"][0]
            assert lite["matchedBy"] == ["keyword"] and lite["matchedTerms"] == ["billing"]
            assert lite["date"].endswith("Z") and lite["date"][:4].isdigit()
    finally:
        app.db.close()


def test_a_zero_document_vector_is_not_stored_and_never_breaks_search(db_path, server, database_url):
    app = create_app(embedding_settings(db_path, server, database_url=database_url))
    try:
        with open_tools(app) as tools:
            server.zero_on = "EMPTYISH"
            blank = put(tools, "EMPTYISH")
            good = put(tools, "car maintenance schedule for the fleet")
            assert run_embeddings(app) == {"embedded": 2, "failed": 0}  # both jobs done…
            assert app.db.read(vectors.count) == 1  # …but only the usable vector is stored
            # A zero vector already on file (written by an older version) compares as NULL: skipped.
            seq = app.db.read(lambda c: c.scalar("SELECT seq FROM memories WHERE id = ?", (blank,)))
            app.db.write(lambda c: vectors.upsert(c, [(seq, NS, "note", 1, None, [0.0] * 256)]))
            found = tools.call("hybrid_search", query="automobile", namespace=NS)
            assert found["mode"] == "hybrid" and [h["_id"] for h in found["items"]] == [good]
            assert [h["_id"] for h in tools.call("recall", query="EMPTYISH", namespace=NS)["items"]] == [blank]
    finally:
        app.db.close()


def test_an_unmistakable_vector_match_may_lead_a_rare_keyword_hit():
    # The vector ranker holds one clear outlier (z ≥ STRONG_Z) the keyword ranker did not find: the
    # exact-evidence guarantee steps aside and the fused scores decide.
    vector = [("paraphrase", 0.97)] + [(f"v{i}", 0.30 - i * 0.0005) for i in range(60)]
    fused = [f.key for f in convex({"keyword": [("rare", 2.0)], "vector": vector})]
    assert fused[0] == "paraphrase" and "rare" in fused[:3]
    # A long keyword list (common words) never triggers the guarantee either.
    keyword = [(f"k{i}", 5.0 - i * 0.01) for i in range(12)]
    assert convex({"keyword": keyword, "vector": vector}, exact_max=5)[0].key == "paraphrase"
