"""#20: a fused candidate borrows from the adjacent memory of the same session (domains/memory/context.py)."""

from __future__ import annotations

import pytest

from vantage_peers.domains.memory import context, store
from vantage_peers.domains.memory.search import hybrid
from vantage_peers.search.fusion import convex

pytestmark = pytest.mark.backends  # each test runs on SQLite and on PostgreSQL (#25)

T0 = 1_780_000_000_000


def _put(app, text: str, namespace: str, at: int) -> int:
    def write(c):
        mid = store.store_memory(c, namespace=namespace, type="note", content=text, created_by="t", now=at)["memoryId"]
        return c.scalar("SELECT seq FROM memories WHERE id = ?", (mid,))

    return app.db.write(write)


def test_neighbours_stay_inside_one_namespace_and_one_session(app):
    a = _put(app, "Did you go to the support group?", "chat/one", T0)
    _put(app, "other namespace, same minute", "chat/two", T0 + 500)
    b = _put(app, "Yes, yesterday; it was wonderful.", "chat/one", T0 + 1_000)
    late = _put(app, "A new session, two hours later", "chat/one", T0 + 2 * 3_600_000)
    near = app.db.read(lambda c: context.neighbours(c, [a, b, late]))
    assert near[a] == [b] and near[b] == [a]  # the other namespace's memory is not a neighbour
    assert near[late] == []  # beyond SESSION_GAP_MS: another session


def test_a_memory_written_between_two_candidates_keeps_them_apart_in_one_batched_check(app):
    """Several close pairs with a seq gap are checked in one statement: each keeps its own answer."""
    at = T0
    seqs, hidden = [], []
    for i in range(6):  # candidate, (other namespace), candidate, ... with a same-namespace one between every other pair
        seqs.append(_put(app, f"turn {i}", "chat/one", at))
        at += 1_000
        _put(app, "elsewhere", "chat/two", at)
        at += 1_000
        if i % 2 == 0:
            hidden.append(_put(app, f"not a candidate {i}", "chat/one", at))
            at += 1_000
    near = app.db.read(lambda c: context.neighbours(c, seqs))
    for i in range(5):
        joined = seqs[i + 1] in near[seqs[i]]
        assert joined is (i % 2 == 1), (i, near)  # a hidden memory of chat/one sits after every even turn
        assert joined is (seqs[i] in near[seqs[i + 1]])


def test_the_answer_next_to_the_matching_turn_is_lifted(app):
    question = _put(app, "Did you go to the support group?", "chat/one", T0)
    answer = _put(app, "Yes, yesterday; it was wonderful.", "chat/one", T0 + 1_000)
    filler = [_put(app, f"unrelated small talk {i}", "chat/one", T0 + 3_600_000 + i * 40 * 60_000) for i in range(4)]
    # The keyword ranker matches the question turn; the vector ranker sees the answer turn as no
    # better than the filler.
    lists = {"keyword": [(question, 9.0), (filler[0], 1.0), (filler[1], 0.9)],
             "vector": [(question, 0.8), (filler[2], 0.41), (filler[3], 0.40), (answer, 0.40), (filler[0], 0.39)]}
    plain = [f.key for f in convex(lists)]
    with_context = app.db.read(lambda c: [f.key for f in convex(
        lists, adjust=lambda s: context.context_bonus(c, s))])
    # Without context the answer trails the filler of equal (or better) similarity; with it, it leads them.
    assert plain.index(answer) > max(plain.index(filler[2]), plain.index(filler[3])), plain
    assert with_context.index(answer) < min(with_context.index(filler[2]), with_context.index(filler[3])), with_context


def test_keyword_mode_keeps_the_bm25_order(app):
    a = _put(app, "alpha beta gamma", "chat/one", T0)
    b = _put(app, "alpha", "chat/one", T0 + 1_000)
    found = app.db.read(lambda c: hybrid(c, query="alpha beta gamma", vector=None, reason="off",
                                         scope=store.scope_of("chat/one"), types=None, include_superseded=False,
                                         limit=10, now=T0 + 5_000))
    seqs = app.db.read(lambda c: {r["id"]: r["seq"] for r in c.query("SELECT id, seq FROM memories")})
    assert [seqs[h["_id"]] for h in found["items"]] == [a, b] and found["mode"] == "keyword"


def test_the_adjacency_statement_answers_what_the_in_list_form_answered(app):
    """context.adjacent binds its candidates as one array on PostgreSQL (db.dialect.among): the pairs are
    the ones the statement with a `?` per candidate finds, on both backends."""
    at, seqs = T0, []
    for i in range(40):  # turns of two namespaces, some close, some a session apart, some with a hidden memory between
        seqs.append(_put(app, f"turn {i}", "chat/one" if i % 3 else "chat/two", at))
        at += 1_000 if i % 5 else 3 * 3_600_000
        if i % 7 == 0:
            _put(app, f"not a candidate {i}", "chat/one", at)
            at += 1_000
    picked = seqs[::2] + seqs[1::4]
    legacy = context._ADJACENT.format(picked=f"seq IN ({','.join('?' for _ in picked)})")
    old = app.db.read(lambda c: [(int(a), int(b)) for a, b in c.rows(legacy, [*picked, context.SESSION_GAP_MS])])
    assert app.db.read(lambda c: context.adjacent(c, picked)) == old and old
