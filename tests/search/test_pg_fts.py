"""PostgreSQL keyword ranking at scale (issue 34, search/pg_fts.py): a word's frequency from
`ts_rank_cd`, the MaxScore first pass over the rarest words, counts remembered within one read only."""

from __future__ import annotations

import time

import pytest

from vantage_peers.db import open_database
from vantage_peers.search import fts, pg_fts
from vantage_peers.search.keyword import keyword_rows

pytestmark = pytest.mark.backends


@pytest.fixture(autouse=True)
def _postgres_only(backend):
    if backend == "sqlite":
        pytest.skip("PostgreSQL's ranking (compared with FTS5 where it matters): runs in the [postgres] half")


def _messages(db, texts, start=0):
    now = int(time.time() * 1000)
    db.write(lambda c: c.executemany(
        "INSERT INTO messages (id, sender, channel, content, createdAt) VALUES (?, 'a', 'general', ?, ?)",
        [(f"m{start + i:04d}", text, now) for i, text in enumerate(texts)]))


def _ranked(db, query, limit=5):
    match = fts.fts_query(query, "or")
    return [(r["id"], r["rank"]) for r in db.read(lambda c: keyword_rows(
        c, fts="messages_fts", table="messages", match=match, limit=limit, columns="d.id"))]


def _spied(monkeypatch) -> list[str]:
    """From now on, each ranking statement's tsquery, in order."""
    calls: list[str] = []
    real = pg_fts._Ranking.__call__

    def spy(self, conn, query, *, nested):
        calls.append(query)
        return real(self, conn, query, nested=nested)

    monkeypatch.setattr(pg_fts._Ranking, "__call__", spy)
    return calls


def _windowed(db, floor, limit):
    """"zephyr common" ranked over the rows at or above `floor` (bounded.py's window)."""
    match = fts.fts_query("zephyr common", "or")
    return [(r["id"], r["rank"]) for r in db.read(lambda c: keyword_rows(
        c, fts="messages_fts", table="messages", match=match, limit=limit, columns="d.id",
        where=[pg_fts.WINDOW], params=[floor]))]


@pytest.mark.parametrize("doc", ["a:1A,2B,3A,5C b:4A", "a:1B,2A,3A,4A,9B b:5A", "a:1A,2A b:3A a:7A", "a:3D,4C"])
@pytest.mark.parametrize("weights", [(1.0, 0.0), (4.0, 1.0), (2.0, 1.0, 1.0, 0.5)])
def test_ts_rank_cd_of_one_word_is_fts5s_weighted_frequency(db, doc, weights):
    """Σ over the word's occurrences of its column's weight, whatever the labels mix."""
    labels = {pg_fts.LABELS[i]: w for i, w in enumerate(weights)}
    for label in (None, "A", "B"):
        term = pg_fts._Term(pg_fts.Phrase("a", None, False), (("a", 0),), label, labels)
        arr, scale = pg_fts._rank_cd_weights(term)  # type: ignore[misc]
        got = db.read(lambda c, arr=arr: c.scalar("SELECT ts_rank_cd(?::float4[], ?::tsvector, 'a'::tsquery)",
                                                  [arr, doc]))
        want = 0.0
        for part in doc.split():
            word, _, occ = part.partition(":")
            if word != "a":
                continue
            for o in occ.split(","):
                lab = o[-1]
                if label is None or lab == label:
                    want += labels.get(lab, 0.0 if label is None else 1.0)
        assert scale * got == pytest.approx(want, abs=1e-12), (doc, weights, label)


def test_a_weight_not_exact_in_float4_takes_the_exact_path():
    term = pg_fts._Term(pg_fts.Phrase("a", None, False), (("a", 0),), None, {"A": 0.3, "B": 1.0})
    assert pg_fts._rank_cd_weights(term) is None


def test_the_rare_words_first_pass_answers_what_ranking_every_row_does(settings, tmp_path, monkeypatch):
    """A query matching more than NESTED_ROWS rows: the first pass over its rarest word answers, with
    the very rows and scores of the full ranking — and of FTS5."""
    texts = [f"common filler {i} " + "common " * (i % 3) for i in range(60)]
    texts += [f"zephyr common {i} " + "zephyr " * (i % 4) for i in range(12)]
    pg = open_database(settings)
    lite = open_database(settings.model_copy(update={"database_url": None, "db_path": tmp_path / "ref.db"}))
    try:
        _messages(pg, texts)
        _messages(lite, texts)
        full = _ranked(pg, "zephyr common")
        monkeypatch.setattr(pg_fts, "NESTED_ROWS", 20)
        calls = _spied(monkeypatch)
        pruned = _ranked(pg, "zephyr common")
        assert len(calls) == 1 and "zephyr" in calls[0] and "&" in calls[0]  # the first pass sufficed
        assert [i for i, _ in pruned] == [i for i, _ in full] == [i for i, _ in _ranked(lite, "zephyr common")]
        assert [r for _, r in pruned] == pytest.approx([r for _, r in full], rel=1e-12)
        calls.clear()
        _ranked(pg, "zephyr common", limit=50)  # more rows asked than the rare word has: every row ranked
        assert len(calls) == 2
    finally:
        pg.close()
        lite.close()


def test_counts_are_remembered_within_one_read_and_a_later_read_sees_a_write(settings):
    """A write from another connection between two reads changes the document frequency read."""
    reader, writer = open_database(settings), open_database(settings)
    query = "('zephyr')"
    try:
        _messages(writer, ["zephyr one", "plain two"])

        def twice(c):
            first = pg_fts.statistics(c, "messages_fts", [query])
            _messages(writer, ["zephyr three"], start=10)  # committed while this read goes on
            return first, pg_fts.statistics(c, "messages_fts", [query])

        first, again = reader.read(twice)
        assert first == again == (2.0, 4.0, [1.0])  # one snapshot: the same counts (remembered or not)
        assert reader.read(lambda c: pg_fts.statistics(c, "messages_fts", [query]))[2] == [2.0]
    finally:
        reader.close()
        writer.close()


@pytest.mark.parametrize("factor", [0.0, 1e9], ids=["backward-scan", "gin-and-sort"])
def test_floors_by_either_plan_are_the_rows_th_newest_and_a_rare_word_is_not_probed(db, monkeypatch, factor):
    """bounded.py's probe: the seq of a word's `rows`-th newest row, by a backward key scan or by the GIN
    index and a sort (BITMAP_FACTOR picks); a word whose count is at most `rows` is never probed."""
    texts = [("common " if i % 3 else "common seldom ") + f"filler{i}" for i in range(40)]
    _messages(db, texts)
    monkeypatch.setattr(pg_fts, "BITMAP_FACTOR", factor)
    probes = []
    real = pg_fts.budget.query

    def query(conn, sql, args=()):
        probes.extend([sql] if "ARRAY(" in sql else [])
        return real(conn, sql, args)

    monkeypatch.setattr(pg_fts.budget, "query", query)
    matches = [fts.fts_query(word, "or") for word in ("common", "seldom", "filler7", "absentword")]
    got = db.read(lambda c: pg_fts.floors(c, fts="messages_fts", matches=matches, rows=10))
    seqs = db.read(lambda c: [int(r["seq"]) for r in c.query(
        "SELECT f.seq FROM messages_fts f JOIN messages d ON d.seq = f.seq ORDER BY f.seq DESC")])
    common = sorted(seqs, reverse=True)
    seldom = [s for s, text in zip(sorted(seqs), texts, strict=True) if "seldom" in text]
    assert got[0] == common[9]  # 40 rows hold "common": its 10th newest
    assert got[1] == sorted(seldom, reverse=True)[9]  # 14 rows hold "seldom"
    assert got[2] is None and got[3] is None  # one row and none: rare
    assert len(probes) == 1 and probes[0].count("ARRAY(") == 2  # only the two common words were probed
    assert ("OFFSET 0) AS vp_m" in probes[0]) is (factor > 0)


def test_ranking_in_the_side_table_first_answers_what_the_joined_statement_does(db, monkeypatch):
    """`_Ranking._side_first`: the best rows ranked without their documents, then filtered, must give the
    rows and ranks of the one statement that filters every matching row — with ties (identical texts),
    a filter passing few rows (its fallback) and one passing none."""
    now = int(time.time() * 1000)
    words = ["alpha", "beta", "gamma", "alpha beta", "beta beta gamma", "alpha alpha alpha"]
    rows = [(f"m{i:04d}", "b" if i % 7 == 0 else "a", f"{words[i % len(words)]} filler{i % 5}", now)
            for i in range(90)]
    db.write(lambda c: c.executemany(
        "INSERT INTO messages (id, sender, channel, content, createdAt) VALUES (?, ?, 'general', ?, ?)", rows))
    side_first = pg_fts._Ranking._side_first
    used: list[bool] = []

    def spy(self, conn, query):
        found = side_first(self, conn, query)
        used.append(found is not None)
        return found

    def ranked(query, limit, where, params, *, first):
        monkeypatch.setattr(pg_fts._Ranking, "_side_first", spy if first else (lambda self, conn, query: None))
        match = fts.fts_query(query, "or")
        return [(r["id"], r["rank"]) for r in db.read(lambda c: keyword_rows(
            c, fts="messages_fts", table="messages", match=match, limit=limit, where=where, params=params,
            columns="d.id"))]

    for factor in (1, 2):
        monkeypatch.setattr(pg_fts, "HEAD_FACTOR", factor)
        monkeypatch.setattr(pg_fts, "HEAD_MARGIN", 0)
        for where, params in [([], []), (["d.sender = ?"], ["a"]), (["d.sender = ?"], ["b"]),
                              (["d.sender = ?"], ["nobody"])]:
            for query in ("alpha", "alpha beta gamma", "filler3 beta"):
                for limit in (1, 3, 10, 200):
                    expected = ranked(query, limit, where, params, first=False)
                    assert ranked(query, limit, where, params, first=True) == expected, (where, params, query, limit)
    assert True in used and False in used  # both the head's answer and the fallback were taken


def test_the_first_pass_inside_the_window_answers_what_ranking_the_whole_window_does(db, monkeypatch):
    """bounded.py's window on PostgreSQL: the rows of the rarer word are ranked first (MaxScore); when
    they fill the top, the answer is the whole window's — rows, order and scores."""
    texts = [f"common filler {i} " + "common " * (i % 3) for i in range(60)]
    texts += [f"zephyr common {i} " + "zephyr " * (i % 4) for i in range(12)]
    _messages(db, texts)
    floor = db.read(lambda c: c.scalar("SELECT min(seq) FROM messages_fts")) + 20  # the window: newer rows only
    whole, wide = _windowed(db, floor, 5), _windowed(db, floor, 40)
    monkeypatch.setattr(pg_fts, "NESTED_ROWS", 20)
    calls = _spied(monkeypatch)
    pruned = _windowed(db, floor, 5)
    assert len(calls) == 1 and "&" in calls[0]  # the first pass sufficed
    assert [i for i, _ in pruned] == [i for i, _ in whole]
    assert [r for _, r in pruned] == pytest.approx([r for _, r in whole], rel=1e-12)
    calls.clear()
    # 12 zephyr rows × the window's 52/72 of the key: fewer than 40 to expect, so no first pass at all.
    assert [i for i, _ in _windowed(db, floor, 40)] == [i for i, _ in wide] and len(calls) == 1 and "&" not in calls[0]


def test_a_first_pass_the_window_cannot_fill_is_skipped_and_one_that_falls_short_is_ranked_again(db, monkeypatch):
    """The window's share of the key says how many rows of the rarer word to expect in it: too few for
    the top and the first pass is skipped; enough expected but found short (its rows are old) and the
    whole window is ranked after it. Either way the answer is the whole window's."""
    texts = [f"zephyr common {i} " + "zephyr " * (i % 4) for i in range(12)]  # the oldest rows
    texts += [f"common filler {i} " + "common " * (i % 3) for i in range(60)]
    _messages(db, texts)
    floor = db.read(lambda c: c.scalar("SELECT min(seq) FROM messages_fts")) + 8  # 4 zephyr rows in it
    expected = {limit: _windowed(db, floor, limit) for limit in (8, 20)}
    monkeypatch.setattr(pg_fts, "NESTED_ROWS", 20)
    calls = _spied(monkeypatch)
    assert _windowed(db, floor, 8) == expected[8]  # 12 × 64/72 ≈ 10.7 expected, 4 found: ranked again
    assert len(calls) == 2 and "&" in calls[0] and "&" not in calls[1]
    calls.clear()
    assert _windowed(db, floor, 20) == expected[20] and len(calls) == 1 and "&" not in calls[0]  # 10.7 < 20: skipped


def test_a_common_words_floor_is_reused_until_enough_rows_are_added_or_the_newest_is_deleted(db, monkeypatch):
    """`_Floors`: the second probe of a word reads nothing; more than FLOOR_DRIFT × rows rows added
    since (or the newest row deleted) and it is probed again, answering for the table as it is."""
    _messages(db, [f"common filler{i}" for i in range(40)])
    probes: list[str] = []
    real = pg_fts.budget.query

    def query(conn, sql, args=()):
        probes.extend([sql] if "ARRAY(" in sql else [])
        return real(conn, sql, args)

    monkeypatch.setattr(pg_fts.budget, "query", query)
    match = [fts.fts_query("common", "or")]

    def floor():
        return db.read(lambda c: pg_fts.floors(c, fts="messages_fts", matches=match, rows=8))[0]

    def eighth_newest():
        return db.read(lambda c: c.scalar("SELECT seq FROM messages_fts ORDER BY seq DESC OFFSET 7 LIMIT 1"))

    first = floor()
    assert first == eighth_newest() and len(probes) == 1
    assert floor() == first and len(probes) == 1  # remembered
    _messages(db, ["common again"], start=100)  # 1 row ≤ 0.25 × 8: still reused (the window grows by one)
    assert floor() == first and len(probes) == 1
    _messages(db, [f"common more{i}" for i in range(3)], start=200)  # 4 rows since: probed again
    assert floor() == eighth_newest() != first and len(probes) == 2
    db.write(lambda c: c.execute("DELETE FROM messages WHERE seq = (SELECT max(seq) FROM messages)"))
    assert floor() == eighth_newest() and len(probes) == 3  # the newest row went: probed again


def test_a_word_is_counted_without_its_label_only_when_it_cannot_be_in_the_token_column(db):
    """memories' `nsKey` holds 'n' + hex(namespace): a word of that shape keeps its label when counted
    (it may be in nsKey too), any other word is counted by the GIN index alone — the same counts."""
    from vantage_peers.domains.memory import store

    def write(c):
        for i in range(6):
            store.store_memory(c, namespace="ab", type="note", content=f"deploy window {i}", created_by="t")
        store.store_memory(c, namespace="zz", type="note", content="the word n6162 in content", created_by="t")

    db.write(write)

    def counted(word):
        def read(c):
            lex = pg_fts.lexemes(c, [word])[word]
            labelled = pg_fts._phrase_tsquery(pg_fts.Phrase("", None, False), lex, "A")
            form = pg_fts._count_form(c, "memories_fts", labelled)
            n, _, [df] = pg_fts.statistics(c, "memories_fts", [labelled])
            exact = c.scalar("SELECT count(*) FROM memories_fts WHERE doc @@ ?::tsquery", [labelled])
            return form == labelled, df, exact
        return db.read(read)

    kept, df, exact = counted("deploy")
    assert not kept and df == exact == 6
    kept, df, exact = counted("n6162")  # nsKey of namespace "ab" in six rows, and in one row's content
    assert kept and df == exact == 1


def test_a_common_word_of_an_analyzed_large_table_takes_its_share_from_postgresqls_statistics(db, monkeypatch):
    """Once ANALYZE has sampled a large table, a word in many rows is not counted: its document
    frequency is ANALYZE's fraction of the current N. A rare word is still counted, and a table
    never analyzed counts every word."""
    monkeypatch.setattr(pg_fts, "LARGE_ROWS", 40)
    monkeypatch.setattr(pg_fts, "ESTIMATED_ROWS", 20)
    pg_fts._stats.clear()
    db.write(lambda c: c.execute("ALTER TABLE messages_fts SET (autovacuum_enabled = false)"))  # ANALYZE: ours only
    _messages(db, [f"common {'rare' if i < 3 else 'plain'} {i}" if i < 60 else f"other {i}" for i in range(100)])
    seen: list[str] = []
    real = pg_fts.budget.query

    def spy(conn, sql, *args, **kwargs):
        seen.append(sql)
        return real(conn, sql, *args, **kwargs)

    monkeypatch.setattr(pg_fts.budget, "query", spy)
    queries = ["('common')", "('rare')"]

    def frequencies():
        seen.clear()
        dfs = db.read(lambda c: pg_fts.statistics(c, "messages_fts", queries))[2]
        counted = sum(sql.count("doc @@") for sql in seen)
        return dfs, counted

    assert frequencies() == ([60.0, 3.0], 2)  # never analyzed: both counted
    db.write(lambda c: c.execute("ANALYZE messages_fts"))
    pg_fts._stats.clear()
    assert frequencies() == ([60.0, 3.0], 1)  # every row sampled: the share is exact; only 'rare' counted
    _messages(db, [f"common again {i}" for i in range(20)], start=100)
    exact = db.read(lambda c: c.scalar("SELECT count(*) FROM messages_fts WHERE doc @@ 'common'::tsquery"))
    pg_fts._stats.clear()  # N, remembered for seconds, is counted again
    dfs, counted = frequencies()
    assert (dfs, counted, exact) == ([72.0, 3.0], 1, 80)  # 60 % of the 120 rows now: ANALYZE's share, not a count
    assert [i for i, _ in _ranked(db, "common rare")][:3] == ["m0000", "m0001", "m0002"]
