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


OTHER = "crew/other"


def _token(scope: str) -> str:
    return msearch._ns_match(store.scope_of(scope))


def _matches_of(monkeypatch, module, name: str) -> list[str]:
    """The `match` argument of every call to `module.name` that follows."""
    seen: list[str] = []
    real = getattr(module, name)

    def spy(conn, **kw):
        seen.append(kw["match"])
        return real(conn, **kw)

    monkeypatch.setattr(module, name, spy)
    return seen


@pytest.fixture
def ranked_matches(monkeypatch):
    """The MATCH expressions of the ranking statements (not the probes) of the calls that follow."""
    return _matches_of(monkeypatch, msearch, "keyword_rows")


def _write(db, rows: list[tuple[str, str]]) -> None:
    db.write(lambda c: [store.store_memory(c, namespace=ns, type="note", content=text, created_by="t")
                        for ns, text in rows])


def _search(db, scope: str, query: str) -> list[tuple[str, float]]:
    found = db.read(lambda c: msearch.text_search(c, query=query, scope=store.scope_of(scope), types=None,
                                                  include_superseded=False, limit=50, now=store.now_ms()))
    return [(hit["_id"], hit["score"]) for hit in found["items"]]


def _in_namespace(db, seqs, namespace: str) -> bool:
    return all(db.read(lambda c, s=s: c.scalar("SELECT namespace FROM memories WHERE seq = ?", [s])) == namespace
               for s in seqs)


def test_a_namespace_holding_the_newest_rows_is_ranked_without_its_token_same_rows_same_scores(
        db, monkeypatch, ranked_matches):
    # Another namespace's rows first and last, sharing the words; NS holds 20 of the newest 21.
    _write(db, [(OTHER, f"common other {i} filler") for i in range(3)]
           + [(NS, f"common note {i} " + "filler " * (i % 4)) for i in range(20)] + [(OTHER, "common filler again")])
    monkeypatch.setattr(bounded, "COMMON_ROWS", 5)
    assert db.read(lambda c: bounded.dense(c, fts="memories_fts", match=_token(NS)))
    assert not db.read(lambda c: bounded.dense(c, fts="memories_fts", match=_token(OTHER)))  # 4 rows: small
    got, hits = candidates(db, "common filler"), _search(db, NS, "common filler")
    assert ranked_matches and not any("nsKey" in m for m in ranked_matches)  # the token was left out
    assert got and _in_namespace(db, got, NS)  # the namespace filter on the row kept the other's rows out
    assert len(hits) == 15  # the rows holding both words (every fourth note has no "filler")
    ranked_matches.clear()
    monkeypatch.setattr(msearch, "_token_pays", lambda conn, scope: True)  # as before: the token always
    assert candidates(db, "common filler") == got
    assert _search(db, NS, "common filler") == hits
    assert ranked_matches and all(m.startswith("nsKey") for m in ranked_matches)


def test_a_namespace_sharing_the_newest_rows_keeps_its_token(db, monkeypatch, ranked_matches):
    # Alternating rows: NS fills half of the key range of its newest rows.
    _write(db, [(ns, f"common note {i} filler") for i in range(12) for ns in (NS, OTHER)])
    monkeypatch.setattr(bounded, "COMMON_ROWS", 5)
    assert not db.read(lambda c: bounded.dense(c, fts="memories_fts", match=_token(NS)))
    got = candidates(db, "common filler")
    assert ranked_matches and all(m.startswith("nsKey") for m in ranked_matches)
    assert got and _in_namespace(db, got, NS)


def test_a_prefix_scope_holding_the_newest_rows_is_ranked_without_its_token(db, monkeypatch, ranked_matches):
    _write(db, [(OTHER, "common filler")] + [(f"{NS}/{i % 3}", f"common note {i}") for i in range(15)])
    monkeypatch.setattr(bounded, "COMMON_ROWS", 5)
    scope = "team/*"
    assert db.read(lambda c: bounded.dense(c, fts="memories_fts", match=_token(scope)))
    hits = _search(db, scope, "common")
    assert len(hits) == 15 and not any("nsKey" in m for m in ranked_matches)
    monkeypatch.setattr(msearch, "_token_pays", lambda conn, scope: True)
    assert _search(db, scope, "common") == hits


def test_text_search_falling_back_to_any_word_decides_the_token_once(db, monkeypatch, ranked_matches):
    _write(db, [(OTHER, "common filler")] + [(NS, f"common note {i}") for i in range(15)])
    monkeypatch.setattr(bounded, "COMMON_ROWS", 5)
    probes = _matches_of(monkeypatch, bounded, "dense")
    found = db.read(lambda c: msearch.text_search(c, query="common absentword", scope=store.scope_of(NS), types=None,
                                                  include_superseded=False, limit=50, now=store.now_ms()))
    assert found["match"] == "any" and len(found["items"]) == 15  # no row holds both words: any word
    assert len(ranked_matches) == 2 and not any("nsKey" in m for m in ranked_matches)  # both passes, no token
    assert probes == [_token(NS)]  # one density probe for the two passes
