"""The one envelope cut (envelope.py), the one keyword-search helper (search/keyword.py) and the one
validators vocabulary (validators.py) that #18 made out of four copies each."""

from __future__ import annotations

import json

import pytest

from vantage_peers.envelope import ENVELOPE_TARGET_BYTES, cut
from vantage_peers.errors import InvalidArgument
from vantage_peers.search.fts import fts_query
from vantage_peers.search.keyword import keyword_docs, keyword_rows
from vantage_peers.validators import Checker, check_choice, check_name, require_query, text


def _size(value) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


# -- envelope.cut ---------------------------------------------------------------------------------
def test_cut_keeps_small_answers_whole():
    items = [{"_id": f"x{i}", "body": "b" * 100} for i in range(50)]
    out = cut(items, {"mode": "keyword"})
    assert out == {"mode": "keyword", "items": items}  # no `truncated` key when nothing was dropped
    assert cut([]) == {"items": []}


def test_cut_halves_until_the_answer_fits():
    items = [{"_id": f"x{i}", "body": "b" * 5_000} for i in range(40)]
    out = cut(items)
    assert out["truncated"] is True and 1 <= len(out["items"]) < 40
    assert out["items"] == items[: len(out["items"])]  # the leading items, in order
    assert _size(out) <= ENVELOPE_TARGET_BYTES


def test_cut_shortens_one_oversize_item_and_names_the_fields():
    big = {"_id": "x1", "content": "é" * 200_000, "title": "short"}
    out = cut([big, {"_id": "x2"}], key="hits")
    assert out["truncated"] is True and [i["_id"] for i in out["hits"]] == ["x1"]
    kept = out["hits"][0]
    assert kept["truncatedFields"] == ["content"] and kept["title"] == "short"
    assert kept["content"].endswith("…") and _size(out) <= ENVELOPE_TARGET_BYTES
    assert len(big["content"]) == 200_000  # the caller's item is never modified


def test_bare_array_answer_is_the_items_of_the_cut():
    items = [{"_id": f"m{i}", "content": "c" * 20_000} for i in range(10)]
    assert cut(items)["items"] == items[:2]  # 10 -> 5 -> 2 under 50,000 bytes


# -- search.keyword -------------------------------------------------------------------------------
@pytest.fixture
def docs(db):
    db.write(lambda c: c.execute(
        "CREATE TABLE docs (seq INTEGER PRIMARY KEY, id TEXT UNIQUE, title TEXT, body TEXT, owner TEXT)"))
    db.write(lambda c: c.execute(
        "CREATE VIRTUAL TABLE docs_fts USING fts5 (title, body, content = 'docs', content_rowid = 'seq')"))
    rows = [("d1", "deploy notes", "nothing else", "a"), ("d2", "other", "we deploy on friday", "b"),
            ("d3", "deploy deploy", "deploy", "a"), ("d4", "unrelated", "words", "a"),
            ("d5", "x'; DROP TABLE docs; --", "deploy \" OR 1=1 --", "b")]
    db.write(lambda c: c.executemany("INSERT INTO docs (id, title, body, owner) VALUES (?, ?, ?, ?)", rows))
    db.write(lambda c: c.execute("INSERT INTO docs_fts (docs_fts) VALUES ('rebuild')"))
    return db


def _ids(db, **query):
    return [r["id"] for r in db.read(lambda c: keyword_rows(c, fts="docs_fts", table="docs", **query))]


def test_keyword_rows_rank_filter_limit_and_snippet(docs):
    match = fts_query("deploy")
    assert set(_ids(docs, match=match, limit=10)) == {"d1", "d2", "d3", "d5"}
    assert _ids(docs, match=match, limit=10)[0] == "d3"  # the densest match ranks first
    assert set(_ids(docs, match=match, limit=10, where=["d.owner = ?"], params=["b"])) == {"d2", "d5"}
    # `inner_where` filters the document table alone (a bare `title` is ambiguous next to docs_fts).
    assert _ids(docs, match=match, limit=10, inner_where=["title = ?"], inner_params=["other"]) == ["d2"]
    assert len(_ids(docs, match=match, limit=2)) == 2
    # Weights: title-only weight ranks the body-only hits (d2, d5: a tie, broken by id) last;
    # body-only weight ranks the title-only hit d1 last.
    assert _ids(docs, match=match, limit=10, weights=(1.0, 0.0))[2:] == ["d2", "d5"]
    assert _ids(docs, match=match, limit=10, weights=(0.0, 1.0))[-1] == "d1"
    hits = docs.read(lambda c: keyword_docs(c, fts="docs_fts", table="docs", match=match, limit=10,
                                            snippet="body", shape=lambda row: {"_id": row["id"]}))
    assert all("score" in h for h in hits) and "deploy" in next(h for h in hits if h["_id"] == "d2")["snippet"]


def test_keyword_rows_hostile_text_is_a_plain_word(docs):
    # SQL and FTS metacharacters in the query match only as words; nothing is executed.
    assert _ids(docs, match=fts_query("x'; DROP TABLE docs; --"), limit=10) == ["d5"]
    assert _ids(docs, match=fts_query('" OR 1=1 --'), limit=10) == ["d5"]
    assert docs.read(lambda c: c.scalar("SELECT count(*) FROM docs")) == 5
    with pytest.raises(ValueError):  # table names come from code: anything else is refused
        docs.read(lambda c: keyword_rows(c, fts="docs_fts", table="docs d; DROP TABLE docs", match="x", limit=1))


# -- validators -----------------------------------------------------------------------------------
def test_one_vocabulary_of_checks():
    assert check_name("  sigma ", "from") == "sigma"
    with pytest.raises(InvalidArgument, match="from is longer than 200"):
        check_name("x" * 201, "from")
    assert check_choice("note", "type", ("note", "fact")) == "note"
    with pytest.raises(InvalidArgument, match="type must be one of note, fact; got 'Note'"):
        check_choice("Note", "type", ("note", "fact"))
    assert require_query("x \ud800 y") == "x \ud800 y"  # a lone surrogate is only an unsearchable token
    with pytest.raises(InvalidArgument, match="surrogate"):
        text("x \ud800 y", "content")  # a stored document field must be valid Unicode
    with pytest.raises(InvalidArgument, match="query is larger than 32768 bytes"):
        require_query("q" * 32_769)


def test_checker_collects_every_failure():
    chk = Checker({"title": "", "owner": 5, "status": "Done", "n": -1, "tags": ["a", ""]})
    chk.text("title", max_bytes=10, example="t")
    chk.name("owner")
    chk.enum("status", ("todo", "done"), example="done")
    chk.number("n", example=1)
    chk.strings("tags", max_items=5, example=["a"])
    chk.text("missing", required=True, max_bytes=10, example="m")
    assert [f.field for f in chk.failures] == ["title", "owner", "status", "n", "tags", "missing"]
    assert all(f.code == "INVALID_ARGUMENT" for f in chk.failures)
