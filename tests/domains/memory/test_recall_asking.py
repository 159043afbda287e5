"""#20: when the query is a question, a memory that only asks is not taken for its answer
(search/asking.py, domains/memory/asking.py)."""

from __future__ import annotations

import math
import random

import pytest

from vantage_peers.domains.memory import asking, store, vectors
from vantage_peers.domains.memory.search import hybrid
from vantage_peers.search.asking import body, is_question, only_asks

T0 = 1_780_000_000_000
HOUR = 3_600_000
NS = "chat/asking"
DIMS = 8


def test_what_counts_as_a_memory_that_only_asks():
    assert only_asks("(1:56 pm on 8 May, 2023) Caroline: Cool! What did it look like?")
    assert only_asks("[2026-11-30] Should we move the queue to Postgres?")
    assert only_asks("Nate: Have you been to the lake? [shares a photo: a lake at dusk]")
    assert not only_asks("(1:56 pm on 8 May, 2023) Caroline: I went to the support group yesterday.")
    assert not only_asks("Is that recent? It looks like you all had fun!")  # it says something too
    # A long text ending on a question (an abstract's rhetorical close) carries statements.
    assert not only_asks("We measured the indexing cost of three systems over a year. " * 5 + "Why not more?")
    assert body("(8 May, 2023) Ana: Done? [photo]") == "Done?"


def test_what_counts_as_a_question():
    assert is_question("When did Nate win the tournament?")
    assert is_question("how many replicas does the queue run")
    assert is_question("lease timeout?")
    assert not is_question("lease timeout decision")
    assert not is_question("")


@pytest.mark.parametrize(("text", "asks"), [
    ("", False), ("?", True), ("]", False), ("[", False), ("[?]", False), ("(((", False), ('" OR 1=1 --', False),
    ("col:x* NEAR(a b) ^start?", True), ("\u0000?", True), ("a:" * 5000 + "?", False), ("(" * 10_000 + "?", False),
    ("[" * 50_000 + "]", False), (" " * 100_000 + "?", False), ("é" * 300_000 + "?", False),
])
def test_hostile_text_is_just_text(text, asks):
    # Bounded patterns over a bounded prefix: a catastrophic backtrack would hang here, not pass.
    assert only_asks(text) is asks
    assert isinstance(is_question(text), bool)


def _unit(v: list[float]) -> list[float]:
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def _axis(i: int, lean: float = 0.0) -> list[float]:
    v = [0.0] * DIMS
    v[i] = 1.0
    v[0] += lean
    return _unit(v)


def _seed(app) -> dict[str, int]:
    """A question turn and its answer a session apart (no context between them), and filler. The
    question turn shares more of the query's words and sits closer to it in vector space."""
    rng = random.Random(7)
    texts = {
        "question": ("(7 November, 2022) Joanna: Which tournament was it, Nate?",
                     _axis(3, 2.5)),
        "answer": ("(7 November, 2022) Nate: I won the final of a big Valorant tournament last Saturday!",
                   _axis(2, 4.0)),
    }
    for i in range(12):
        texts[f"filler{i}"] = (f"(7 November, 2022) Joanna: Nate, filler talk {i} about recipes and a movie",
                               _unit([rng.uniform(-0.2, 0.2) for _ in range(DIMS)]))
    seqs: dict[str, int] = {}

    def write(c) -> None:
        vectors.ensure(c, "m", DIMS)
        rows = []
        for n, (name, (text, vec)) in enumerate(texts.items()):
            mid = store.store_memory(c, namespace=NS, type="note", content=text, created_by="t",
                                     now=T0 + n * 2 * HOUR)["memoryId"]
            seqs[name] = c.scalar("SELECT seq FROM memories WHERE id = ?", (mid,))
            rows.append((seqs[name], NS, "note", 1, None, vec))
        vectors.upsert(c, rows)

    app.db.write(write)
    return seqs


def _order(app, seqs: dict[str, int], query: str) -> list[str]:
    names = {v: k for k, v in seqs.items()}
    ids = app.db.read(lambda c: {r["id"]: r["seq"] for r in c.query("SELECT id, seq FROM memories")})
    found = app.db.read(lambda c: hybrid(c, query=query, vector=_axis(1, 3.0), reason=None,
                                         scope=store.scope_of(NS), types=None, include_superseded=False,
                                         limit=10, now=T0 + 100 * HOUR))
    assert found["mode"] == "hybrid"
    return [names[ids[h["_id"]]] for h in found["items"]]


@pytest.mark.backends
def test_the_answer_outranks_a_question_that_matches_better(app, monkeypatch):
    seqs = _seed(app)
    query = "Which tournament did Nate win?"
    monkeypatch.setattr(asking, "ASKS_PENALTY", 0.0)
    plain = _order(app, seqs, query)
    assert plain.index("question") < plain.index("answer"), plain  # what recall did before
    monkeypatch.undo()
    shipped = _order(app, seqs, query)
    assert shipped.index("answer") < shipped.index("question"), shipped
    assert shipped[:2] == ["answer", "question"]  # demoted, not dropped: still above the filler


@pytest.mark.backends
def test_a_keyword_query_is_not_a_question(app):
    seqs = _seed(app)
    order = _order(app, seqs, "tournament Nate win")
    assert order.index("question") < order.index("answer"), order


def _put(app, text: str, at: int) -> int:
    def write(c):
        mid = store.store_memory(c, namespace=NS, type="note", content=text, created_by="t", now=at)["memoryId"]
        return c.scalar("SELECT seq FROM memories WHERE id = ?", (mid,))

    return app.db.write(write)


def _fused(app, lists, query: str) -> list[int]:
    from vantage_peers.domains.memory.context import context_bonus
    from vantage_peers.search.fusion import convex

    def adjust(c, scores):
        out = dict(context_bonus(c, scores))
        for key, extra in asking.asking_adjust(c, query, scores).items():
            out[key] = out.get(key, 0.0) + extra
        return out

    return app.db.read(lambda c: [f.key for f in convex(lists, adjust=lambda s: adjust(c, s))])


@pytest.mark.backends
def test_the_reply_to_a_matching_question_is_lifted(app, monkeypatch):
    query = "Did Melanie go to the pottery class?"
    asked = _put(app, "(3 July, 2023) Caroline: Did you go to the pottery class, Melanie?", T0)
    reply = _put(app, "(3 July, 2023) Melanie: Yes! I made a bowl and a little plate.", T0 + 1_000)
    before = _put(app, "(3 July, 2023) Melanie: Hi Caroline, long week here.", T0 - 1_000)
    filler = [_put(app, f"(4 July, 2023) Melanie: small talk {i}", T0 + (i + 1) * 2 * HOUR) for i in range(6)]
    # BM25 and the vector side find the question turn; the reply shares no word and sits among filler.
    lists = {"keyword": [(asked, 3.0), (filler[0], 2.6), (filler[1], 2.5), (filler[2], 2.4), (before, 1.0),
                         (filler[3], 0.9), (filler[4], 0.8)],
             "vector": [(asked, 0.52), (filler[0], 0.50), (filler[1], 0.49), (filler[2], 0.48), (filler[3], 0.47),
                        (reply, 0.38), (before, 0.34), (filler[4], 0.33), (filler[5], 0.30)]}
    monkeypatch.setattr(asking, "ASK_LEND", 0.0)
    plain = _fused(app, lists, query)
    assert plain.index(reply) > 3, plain  # session context alone leaves it behind the filler
    monkeypatch.undo()
    lifted = _fused(app, lists, query)
    assert lifted.index(reply) <= 1, lifted  # the question lends its reply its strength
    # Only the memory written *after* a question is its reply: the one before gets no share of it.
    assert lifted.index(before) > lifted.index(reply)
    # A keyword query is not a question: nothing lends, nothing is demoted.
    keywords = _fused(app, lists, "pottery class Melanie")
    assert keywords[0] == asked and keywords.index(reply) > 3, keywords
