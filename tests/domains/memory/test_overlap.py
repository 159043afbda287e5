"""memory/overlap.py: recall's keyword stage on a worker thread while the query is embedded and the
KNN runs — the same answer as the one-thread hybrid, inside the call's scope, errors passed on."""

from __future__ import annotations

import random
import threading

import pytest

from vantage_peers.core.ids import now_ms
from vantage_peers.db import current_scope
from vantage_peers.domains.memory import overlap, search, store, vectors

pytestmark = pytest.mark.backends

DIMS = 32
WORDS = ["deploy", "rollback", "cache", "schema", "index", "vector", "queue", "lease", "token", "budget"]


def _vec(rng: random.Random) -> list[float]:
    return [rng.gauss(0, 1) for _ in range(DIMS)]


@pytest.fixture
def filled(db):
    rng = random.Random(3)

    def fill(c) -> None:
        vectors.ensure(c, "m", DIMS)
        rows = []
        for i in range(120):
            text = " ".join(rng.choice(WORDS) for _ in range(6)) + f" note {i}"
            mid = store.store_memory(c, namespace="team/x", type="fact", content=text, created_by="t")["memoryId"]
            seq = c.scalar("SELECT seq FROM memories WHERE id = ?", (mid,))
            rows.append((seq, "team/x", "fact", 1, None, _vec(rng)))
        vectors.upsert(c, rows)

    db.write(fill)
    return db, rng


def _args(query: str) -> dict:
    return dict(query=query, scope=store.scope_of("team/x"), types=None, include_superseded=False, limit=10,
                now=now_ms())


def test_the_overlapped_recall_answers_what_the_one_thread_hybrid_answers(filled):
    db, rng = filled
    for query in ("deploy cache", "lease token budget", "rollback", "nothing matches this"):
        vec = _vec(rng)
        args = _args(query)
        alone = db.read(lambda c, a=args, v=vec: search.hybrid(c, vector=v, reason=None, **a))
        both = overlap.recall(db, embed=lambda v=vec: (v, None), **args)
        assert [h["_id"] for h in both["items"]] == [h["_id"] for h in alone["items"]]
        assert both["mode"] == "hybrid" and both["items"] == alone["items"]
    keyword_only = overlap.recall(db, embed=lambda: (None, "embeddings are off"), **_args("deploy"))
    assert keyword_only["mode"] == "keyword" and keyword_only["reason"] == "embeddings are off"
    assert keyword_only["items"] and all("deploy" in h["content"] for h in keyword_only["items"])


def test_the_keyword_stage_runs_on_another_thread_inside_the_callers_scope(filled, monkeypatch):
    db, rng = filled
    seen: list[tuple[int, object]] = []
    real = search.keyword_candidates

    def spy(conn, **kw):
        seen.append((threading.get_ident(), current_scope()))
        return real(conn, **kw)

    monkeypatch.setattr(search, "keyword_candidates", spy)
    with db.call_scope() as scope:
        out = overlap.recall(db, embed=lambda: (_vec(rng), None), **_args("schema index"))
    assert out["items"]
    assert len(seen) == 1 and seen[0][0] != threading.get_ident() and seen[0][1] is scope


def test_an_embedding_failure_reaches_the_caller(filled):
    db, _ = filled

    def broken():
        raise RuntimeError("model crashed")

    with pytest.raises(RuntimeError, match="model crashed"):
        overlap.recall(db, embed=broken, **_args("deploy"))
    assert overlap.recall(db, embed=lambda: (None, "down"), **_args("deploy"))["items"]  # the pool still works


def test_hits_whose_rows_are_gone_when_read_give_their_places_to_the_next(filled, monkeypatch):
    """The head's rows are read for the first `limit` hits; when some are gone (deleted since they were
    ranked), the margin after them is read and the answer is the next hits, in fused order."""
    db, rng = filled
    vec = _vec(rng)
    wide = db.read(lambda c: search.hybrid(c, vector=vec, reason=None, **{**_args("deploy cache"), "limit": 13}))
    gone = {h["_id"] for h in wide["items"][:3]}
    real = search._rows_by_seq
    reads: list[int] = []

    def rows_by_seq(conn, seqs, where, params):
        reads.append(len(seqs))
        return {seq: row for seq, row in real(conn, seqs, where, params).items() if row["id"] not in gone}

    monkeypatch.setattr(search, "_rows_by_seq", rows_by_seq)
    got = db.read(lambda c: search.hybrid(c, vector=vec, reason=None, **_args("deploy cache")))
    assert got["items"] == [h for h in wide["items"] if h["_id"] not in gone][:10]
    assert reads == [10, 20]  # the first `limit`, then the margin (2 × limit + 10 in all)
    reads.clear()
    gone.clear()
    assert db.read(lambda c: search.hybrid(c, vector=vec, reason=None, **_args("deploy cache")))["items"] == \
        wide["items"][:10] and reads == [10]  # nothing gone: one read of `limit` rows
