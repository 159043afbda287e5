"""Bounded keyword candidates (issue 34, search/bounded.py): a word matching more than COMMON_ROWS
memories is ranked over its newest ones; rare words keep every row; without a common word nothing changes."""

from __future__ import annotations

import pytest

from vantage_peers.domains.memory import search as msearch
from vantage_peers.domains.memory import store
from vantage_peers.search import bounded

pytestmark = pytest.mark.backends

NS = "team/bounded"


def candidates(db, query: str) -> dict[int, float]:
    rows = db.read(lambda c: msearch.keyword_hits(c, query=query, scope=store.scope_of(NS), types=None,
                                                  include_superseded=False, now=store.now_ms(), limit=100,
                                                  mode="or", candidates=True))
    return {row["seq"]: row["rank"] for row in rows}


@pytest.fixture
def seeded(db):
    def run(c):
        seqs = {}
        # The oldest memory holds the rare word; then 12 holding only the common one, the newest holding both.
        seqs["old rare"] = c.scalar("SELECT seq FROM memories WHERE id = ?", [store.store_memory(
            c, namespace=NS, type="note", content="zephyrine common ground", created_by="t")["memoryId"]])
        for i in range(12):
            store.store_memory(c, namespace=NS, type="note", content=f"common note {i} " + "filler " * i,
                               created_by="t")
        seqs["new both"] = c.scalar("SELECT seq FROM memories WHERE id = ?", [store.store_memory(
            c, namespace=NS, type="note", content="zephyrine and common again", created_by="t")["memoryId"]])
        return seqs

    return db.write(run)


def test_a_common_word_is_ranked_over_its_newest_rows_only(db, seeded, monkeypatch):
    unbounded = candidates(db, "common")
    assert len(unbounded) == 14
    monkeypatch.setattr(bounded, "COMMON_ROWS", 5)
    capped = candidates(db, "common")
    newest = sorted(unbounded)[-5:]
    assert sorted(capped) == newest  # the 5 newest rows of the word, no older one
    assert all(capped[seq] == pytest.approx(unbounded[seq]) for seq in capped)  # the same BM25 scores


def test_a_rare_word_keeps_its_old_rows_and_a_row_of_both_keeps_the_whole_score(db, seeded, monkeypatch):
    unbounded = candidates(db, "zephyrine common")
    monkeypatch.setattr(bounded, "COMMON_ROWS", 5)
    capped = candidates(db, "zephyrine common")
    assert seeded["old rare"] in capped  # older than the window: found by its rare word
    assert capped[seeded["new both"]] == pytest.approx(unbounded[seeded["new both"]])
    # Its rank there is its rare word's alone: a lower bound of the whole query's score (BM25 adds).
    assert capped[seeded["old rare"]] >= unbounded[seeded["old rare"]] - 1e-9
    assert len(capped) < len(unbounded)


def test_without_a_common_word_the_ranking_is_unchanged(db, seeded, monkeypatch):
    before = candidates(db, "zephyrine filler")
    monkeypatch.setattr(bounded, "COMMON_ROWS", 12)  # "filler" is in 11 rows, "zephyrine" in 2: both rare
    assert candidates(db, "zephyrine filler") == before
