"""#20: date-aware matching — "when" questions and named periods (search/temporal.py, domains/memory/dates.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from vantage_peers.domains.memory import dates, store
from vantage_peers.search import temporal
from vantage_peers.search.fusion import convex

NOW = int(datetime(2026, 12, 1, 15, 0, tzinfo=UTC).timestamp() * 1000)  # a Tuesday
DAY = 86_400_000


def _ms(*args: int) -> int:
    return int(datetime(*args, tzinfo=UTC).timestamp() * 1000)


@pytest.mark.parametrize(("query", "expected"), [
    ("When did Caroline go to the LGBTQ support group?", True),
    ("when is the release planned", True),
    ("What year did we move to PostgreSQL?", True),
    ("how long ago did the cache fail", True),
    ("Who supports Caroline when she has a negative experience?", False),  # "when" as a conjunction
    ("What did Melanie paint?", False),
    ("PR-1234", False),
    ("", False),
])
def test_asks_when(query, expected):
    assert temporal.asks_when(query) is expected


@pytest.mark.parametrize(("text", "expected"), [
    ("(1:56 pm on 8 May, 2023) Caroline: I went to a LGBTQ support group yesterday", True),
    ("(1:56 pm on 8 May, 2023) Caroline: the support group was so powerful", False),  # the stamp alone
    ("[2026-11-30] deployed the cache fix", False),
    ("[2026-11-30] deployed the cache fix last Friday", True),
    ("We moved to PostgreSQL in 2024", True),
    ("the migration ran three weeks ago", True),
    ("see you on Saturday", True),
    ("next month we switch providers", True),
    ("tsk_8f2a31 fixes the login form", False),
    ("I may go to the conference", False),  # "may" the verb, not the month
    ("we met on May 8", True),
    ("a " * 10_000, False),  # long input: linear, no match
    ("a " * 10_000 + "yesterday", False),  # only the first SCAN_CHARS characters are read (bounded cost)
    ("yesterday " + "a " * 10_000, True),
    ("friday night we shipped", True),
    ("the other day the build broke", True),
    ("in the next couple of weeks", True),
    ("3rd of May", True),
])
def test_mentions_time(text, expected):
    assert temporal.mentions_time(text) is expected


def test_windows_are_computed_from_now_in_utc():
    today = _ms(2026, 12, 1)
    assert temporal.window("what did we decide yesterday?", NOW) == (today - DAY, today)
    assert temporal.window("notes from today", NOW) == (today, today + DAY)
    assert temporal.window("anything last week about leases", NOW) == (_ms(2026, 11, 23), _ms(2026, 11, 30))
    assert temporal.window("decisions this month", NOW) == (_ms(2026, 12, 1), today + DAY)
    assert temporal.window("the outage last month", NOW) == (_ms(2026, 11, 1), _ms(2026, 12, 1))
    assert temporal.window("what changed in June", NOW) == (_ms(2026, 6, 1), _ms(2026, 7, 1))
    assert temporal.window("in December 2025", NOW) == (_ms(2025, 12, 1), _ms(2026, 1, 1))
    assert temporal.window("released in 2024", NOW) == (_ms(2024, 1, 1), _ms(2025, 1, 1))
    assert temporal.window("past 3 days", NOW) == (today - 3 * DAY, today + DAY)
    assert temporal.window("the cache eviction bug", NOW) is None


def _put(app, text: str, at: int, namespace: str = "chat/one") -> int:
    def write(c):
        mid = store.store_memory(c, namespace=namespace, type="note", content=text, created_by="t", now=at)["memoryId"]
        return c.scalar("SELECT seq FROM memories WHERE id = ?", (mid,))

    return app.db.write(write)


@pytest.mark.backends  # the head's rows are read through the backend (#25)
def test_a_when_question_prefers_the_memory_that_says_when(app):
    plain = _put(app, "Ana deployed the cache service, it went fine", NOW - 3 * DAY)
    dated = _put(app, "Ana deployed the cache service yesterday", NOW - 3 * DAY + 1_000)
    filler = [_put(app, f"unrelated note {i}", NOW - 3 * DAY + 2_000 + i) for i in range(8)]
    # Both memories match the question equally on both rankers; the dated one is the answer. (The
    # keyword list is longer than fusion.EXACT_MAX: common words, not an identifier.)
    lists = {"keyword": [(plain, 5.0), (dated, 5.0)] + [(f, 1.0 - i / 10) for i, f in enumerate(filler)],
             "vector": [(plain, 0.8), (dated, 0.8), (filler[1], 0.3), (filler[2], 0.2)]}
    question = "When did Ana deploy the cache service?"
    without = [f.key for f in convex(lists)]
    with_dates = app.db.read(lambda c: [f.key for f in convex(lists, adjust=lambda s: dates.date_bonus(c, question, NOW, s))])
    assert without.index(plain) < without.index(dated)  # first appearance breaks the tie
    assert with_dates.index(dated) == 0, with_dates
    # A question that does not ask "when" leaves the order alone.
    other = app.db.read(lambda c: dates.date_bonus(c, "What did Ana deploy?", NOW, {plain: 1.0, dated: 1.0}))
    assert other == {}


@pytest.mark.backends  # the head's rows are read through the backend (#25)
def test_a_named_period_prefers_memories_written_in_it(app):
    old = _put(app, "decided: keep the lease timeout at 30 s", NOW - 20 * DAY)
    recent = _put(app, "decided: raise the lease timeout to 60 s", NOW - DAY)  # yesterday
    scores = {old: 1.0, recent: 0.9}
    bonus = app.db.read(lambda c: dates.date_bonus(c, "what did we decide yesterday about the lease timeout", NOW, scores))
    assert set(bonus) == {recent} and bonus[recent] == dates.WINDOW_BONUS
    # Another namespace's memory never enters: the bonus only reorders the candidates given.
    _put(app, "decided yesterday: lease timeout 90 s", NOW - DAY, namespace="chat/other")
    bonus = app.db.read(lambda c: dates.date_bonus(c, "what did we decide yesterday", NOW, scores))
    assert set(bonus) == {recent}


@pytest.mark.backends  # the head's rows are read through the backend (#25)
def test_hybrid_applies_the_date_bonus_end_to_end(app, monkeypatch):
    from vantage_peers.domains.memory import search as msearch

    plain = _put(app, "Ana deployed the cache service, it went fine", NOW - 3 * DAY)
    dated = _put(app, "Ana deployed the cache service yesterday", NOW - 3 * DAY + 1_000)
    seen: list[str] = []
    real = msearch.date_bonus

    def spy(conn, query, now, scores):
        seen.append(query)
        return real(conn, query, now, scores)

    monkeypatch.setattr(msearch, "date_bonus", spy)
    # A query vector is needed for hybrid mode: the vectors table exists only once something was embedded.
    monkeypatch.setattr(msearch, "vector_hits", lambda *a, **k: [(plain, 0.2), (dated, 0.2)])
    found = app.db.read(lambda c: msearch.hybrid(c, query="When did Ana deploy the cache service?", vector=[1.0, 0.0],
                                                reason=None, scope=store.scope_of("chat/one"), types=None,
                                                include_superseded=False, limit=10, now=NOW))
    ids = app.db.read(lambda c: {r["seq"]: r["id"] for r in c.query("SELECT id, seq FROM memories")})
    assert seen == ["When did Ana deploy the cache service?"]
    assert [h["_id"] for h in found["items"]][:1] == [ids[dated]] and found["mode"] == "hybrid"
