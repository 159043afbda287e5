"""search/snippets.py: a Highlighter remembers each word's term and `add_snippets` finds a row's matches
once for its snippet and its matched terms — the same snippets and terms as computing each anew."""

from __future__ import annotations

import random

from vantage_peers.search import snippets
from vantage_peers.search.snippets import Highlighter, add_snippets, words_of

WORDS = ["running", "runway", "rune", "Run", "cache", "caches", "cached", "café", "Café", "deploy", "deployed",
         "deployments", "rollback", "other", "schema", "schemas", "ruin", "rudder", "cafeteria", "depot"]


def _fresh(match: str, text: str | None) -> tuple[str | None, list[str]]:
    """The snippet and the matched terms as before: a new Highlighter for each, hits found twice."""
    if not text:
        return Highlighter(words_of(match)).snippet(text), []
    return (Highlighter(words_of(match)).snippet(text),
            list(dict.fromkeys(t for _, t in Highlighter(words_of(match)).hits(text))))


def test_remembered_terms_and_hits_give_the_snippets_computed_anew():
    rng = random.Random(7)
    for match in ['"run" OR "cache"', '"deploy" "schema"', '"café"', '"rollback" OR "run" OR "depot"']:
        rows = [{"content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 80)))} for _ in range(30)]
        rows.append({"content": None})
        add_snippets(rows, match, "content", terms=True)
        for row in rows:
            assert (row["snippet"], row["matchedTerms"]) == _fresh(match, row["content"]), row


def test_a_highlighter_remembers_a_bounded_number_of_words(monkeypatch):
    monkeypatch.setattr(snippets, "_SEEN_MAX", 3)
    hl = Highlighter(["run"])
    assert [hl.term(w) for w in ["running", "rune", "Run", "runway", "running"]] == ["run", None, "run", None, "run"]
    assert len(hl._seen) == 3
