"""Diary: upsert by (orchestrator, date), reads, paging, date ranges, RBAC on delete, hostile input."""

from __future__ import annotations

import pytest
from conftest import open_tools
from support.records_helpers import call, error, page_all

from vantage_peers.domains.diary import store
from vantage_peers.server import create_app

pytestmark = pytest.mark.backends


def test_write_is_an_upsert_keyed_by_orchestrator_and_date(tools):
    first = tools.call("write_diary", date="2026-05-29", orchestrator="sigma", content="v1", highlights=["a"])
    again = tools.call("write_diary", date="2026-05-29", orchestrator="sigma", content="v2", blockers=["b"])
    other = tools.call("write_diary", date="2026-05-29", orchestrator="pi", content="pi's day")
    assert first == again and first.startswith("dia_") and other != first
    entry = tools.call("get_diary", date="2026-05-29", orchestrator="sigma")
    assert entry["_id"] == first and entry["content"] == "v2"
    assert entry["blockers"] == ["b"] and "highlights" not in entry  # overwritten, not merged
    assert entry["_creationTime"] == entry["createdAt"] and entry["updatedAt"] >= entry["createdAt"]
    assert tools.call("get_diary", date="2026-05-28", orchestrator="sigma") is None


def test_content_kept_exactly(tools):
    body = "Jour 82 — livré ✅\r\n  trailing   \n\n🙂"
    tools.call("write_diary", date="2026-01-02", orchestrator="sigma", content=body)
    assert tools.call("get_diary", date="2026-01-02", orchestrator="sigma")["content"] == body


def test_nul_in_content_is_kept_on_sqlite_and_refused_coded_on_postgresql(tools, backend):
    body = "before\x00after"
    if backend == "postgres":  # PostgreSQL text cannot hold U+0000: a clean refusal, nothing written
        assert "INVALID_ARGUMENT" in tools.error("write_diary", date="2026-01-03", orchestrator="sigma", content=body)
        assert tools.call("get_diary", date="2026-01-03", orchestrator="sigma") is None
        assert tools.call("write_diary", date="2026-01-03", orchestrator="sigma", content="fine")  # still usable
    else:
        tools.call("write_diary", date="2026-01-03", orchestrator="sigma", content=body)
        assert tools.call("get_diary", date="2026-01-03", orchestrator="sigma")["content"] == body


def test_list_diaries_insert_n_get_n_newest_date_first(tools):
    n = 45
    for i in range(n):
        tools.call("write_diary", date=f"2026-0{1 + i // 28}-{1 + i % 28:02d}", orchestrator="sigma", content=f"d{i}")
    tools.call("write_diary", date="2026-01-01", orchestrator="pi", content="other")
    items, pages = page_all(tools, "list_diaries", orchestrator="sigma", limit=7)
    assert len(items) == n and pages == 7
    dates = [i["date"] for i in items]
    assert dates == sorted(dates, reverse=True) and len(set(dates)) == n
    assert len(page_all(tools, "list_diaries")[0]) == n + 1
    assert len(tools.call("list_diaries", orchestrator="sigma")["items"]) == 20  # default limit
    assert len(tools.call("list_diaries", orchestrator="sigma", limit=10_000)["items"]) == n
    lite = tools.call("list_diaries", orchestrator="sigma", fields="lite", limit=200)["items"]
    assert len(lite) == n
    assert all(set(i) == {"_id", "_creationTime", "date", "orchestrator"} for i in lite)


def test_list_diaries_date_range_and_same_date_ties(tools):
    for orch in ("a", "b", "c", "d", "e"):
        for day in ("2026-03-01", "2026-03-02", "2026-03-03"):
            tools.call("write_diary", date=day, orchestrator=orch, content="x")
    items, _ = page_all(tools, "list_diaries", limit=2, **{"from": "2026-03-02", "to": "2026-03-03"})
    assert len(items) == 10 and len({i["_id"] for i in items}) == 10
    assert {i["date"] for i in items} == {"2026-03-02", "2026-03-03"}
    assert "INVALID_ARGUMENT" in tools.error("list_diaries", to="03/03/2026")


def test_list_by_date_range_is_inclusive_ascending_array(tools):
    for day in ("2026-05-19", "2026-05-20", "2026-05-25", "2026-05-29", "2026-05-30"):
        tools.call("write_diary", date=day, orchestrator="sigma", content=day)
    tools.call("write_diary", date="2026-05-22", orchestrator="pi", content="pi")
    got = tools.call("list_diary_by_date_range", **{"from": "2026-05-20", "to": "2026-05-29"}, orchestrator="sigma")
    assert isinstance(got, list)
    assert [e["date"] for e in got] == ["2026-05-20", "2026-05-25", "2026-05-29"]
    every = tools.call("list_diary_by_date_range", **{"from": "2026-05-20", "to": "2026-05-29"})
    assert [e["date"] for e in every] == ["2026-05-20", "2026-05-22", "2026-05-25", "2026-05-29"]
    assert len(tools.call("list_diary_by_date_range", **{"from": "2026-01-01", "to": "2026-12-31"}, limit=2)) == 2
    assert "must be on or before" in tools.error("list_diary_by_date_range", **{"from": "2026-05-29", "to": "2026-05-01"})


def test_delete_diary_owner_or_system_only(tools):
    a = tools.call("write_diary", date="2026-05-29", orchestrator="sigma", content="x")
    b = tools.call("write_diary", date="2026-05-30", orchestrator="sigma", content="y")
    assert "RBAC_DENIED" in tools.error("delete_diary", diaryId=a, callerOrchestrator="pi")
    assert "INVALID_ARGUMENT" in tools.error("delete_diary", diaryId=a)  # no caller, no VP_ORCHESTRATOR
    assert tools.call("get_diary", date="2026-05-29", orchestrator="sigma") is not None
    assert tools.call("delete_diary", diaryId=a, callerOrchestrator="sigma") == {"deleted": True}
    assert tools.call("delete_diary", diaryId=b, callerOrchestrator="system") == {"deleted": True}
    assert tools.call("delete_diary", diaryId=a, callerOrchestrator="sigma") == {"deleted": False}
    assert tools.call("get_diary", date="2026-05-29", orchestrator="sigma") is None


def test_identity_defaults_to_vp_orchestrator(settings):
    app = create_app(settings.model_copy(update={"orchestrator": "sigma", "instance_id": "sigma-01"}))
    try:
        with open_tools(app) as tools:
            entry_id = tools.call("write_diary", date="2026-05-29", content="x")
            entry = tools.call("get_diary", date="2026-05-29")
            assert entry["orchestrator"] == "sigma" and entry["instanceId"] == "sigma-01"
            assert tools.call("delete_diary", diaryId=entry_id) == {"deleted": True}
    finally:
        app.db.close()


@pytest.mark.parametrize("bad", ["2026-02-30", "2026-5-29", "29/05/2026", "", "2026-05-29T00:00", "🙂", "x" * 1000])
def test_bad_dates_are_clean_errors(tools, bad):
    assert "INVALID_ARGUMENT" in tools.error("write_diary", date=bad, orchestrator="sigma", content="x")
    assert "INVALID_ARGUMENT" in tools.error("get_diary", date=bad, orchestrator="sigma")


def test_hostile_and_huge_input(tools):
    big = "é" * 600_000  # 1.2 MB of UTF-8
    assert "larger than" in tools.error("write_diary", date="2026-05-29", orchestrator="s", content=big)
    ok = "x" * 1_000_000
    tools.call("write_diary", date="2026-05-29", orchestrator="s", content=ok)
    assert tools.call("get_diary", date="2026-05-29", orchestrator="s")["content"] == ok
    assert "INVALID_ARGUMENT" in tools.error("write_diary", date="2026-05-29", orchestrator="s", content="   ")
    assert "INVALID_ARGUMENT" in tools.error("write_diary", date="2026-05-29", orchestrator="s", content="x",
                                             highlights=[""])
    assert "INVALID_ARGUMENT" in tools.error("write_diary", date="2026-05-29", orchestrator="s", content="\ud800")
    tools.error("write_diary", date="2026-05-29", orchestrator="s", content=["not", "text"])
    assert tools.call("get_diary", date="2026-05-29", orchestrator="'; DROP TABLE diary; --") is None
    assert tools.call("delete_diary", diaryId="'; DROP TABLE diary; --", callerOrchestrator="s") == {"deleted": False}
    assert "cursor" in tools.error("list_diaries", cursor="not-a-cursor!!")
    assert call(tools, "list_diaries", {"orchestrator": "s", "detail": "full"})["items"][0]["content"] == ok
    assert error(tools, "list_diaries", {"fields": "medium"})


def test_store_upsert_on_a_file(db):
    ids = {db.write(lambda c, i=i: store.write_diary(c, date="2026-05-29", orchestrator="sigma", content=f"v{i}"))
           for i in range(5)}
    assert len(ids) == 1
    assert db.read(lambda c: c.scalar("SELECT count(*) FROM diary")) == 1
    assert db.read(lambda c: store.get_diary(c, orchestrator="sigma", date="2026-05-29"))["content"] == "v4"


def test_list_diaries_refuses_an_inverted_range(tools):
    assert "INVALID_ARGUMENT" in tools.error("list_diaries", **{"from": "2026-03-05", "to": "2026-03-01"})
