"""Core building blocks: ids, settings, FTS quoting, paging, migrations."""

from __future__ import annotations

import json
import threading

import pytest

from vantage_peers.core.envelope import ENVELOPE_TARGET_BYTES
from vantage_peers.core.errors import InvalidArgument
from vantage_peers.core.ids import new_id
from vantage_peers.db import Database, current_version, latest_version, migrate, paging
from vantage_peers.pipeline.settings import Settings
from vantage_peers.search.fts import fts_query


def test_ids_are_prefixed_unique_and_sortable():
    ids = [new_id("tsk") for _ in range(5000)]
    assert len(set(ids)) == 5000
    assert ids == sorted(ids)
    assert all(i.startswith("tsk_") and len(i) == 30 for i in ids)


def test_ids_unique_across_threads():
    out: list[str] = []
    lock = threading.Lock()

    def work():
        mine = [new_id("x") for _ in range(2000)]
        with lock:
            out.extend(mine)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(out)) == 8000


def test_settings_from_env_and_dotenv(tmp_path, monkeypatch):
    (tmp_path / ".env").write_text("VP_ORCHESTRATOR=fromdotenv\nVP_TICK_SECONDS=3\nOPENAI_API_KEY=k\n")
    monkeypatch.chdir(tmp_path)
    s = Settings.from_env({"VP_ORCHESTRATOR": "fromenv", "VP_DB_PATH": str(tmp_path / "x.db")})
    assert s.orchestrator == "fromenv"  # environment wins over .env
    assert s.tick_seconds == 3.0
    assert s.embeddings == "local"  # a key in a .env (maybe another app's) does not switch openai on
    assert s.openai_api_key is None
    (tmp_path / ".env").write_text("VP_EMBEDDINGS=openai\nOPENAI_API_KEY=k\n")  # written for vantage-peers
    assert Settings.from_env({}).embeddings == "openai" and Settings.from_env({}).openai_api_key == "k"
    assert Settings.from_env({"OPENAI_API_KEY": "k"}, dotenv=False).embeddings == "openai"  # real env: on
    assert s.db_path == tmp_path / "x.db"
    s2 = Settings.from_env({"VP_EMBEDDINGS": "none", "OPENAI_API_KEY": "k"}, dotenv=False)
    assert s2.embeddings == "none"
    assert Settings.from_env({}, dotenv=False).db_path.name == "vantage-peers.db"


@pytest.mark.parametrize(
    "env",
    [{"VP_JOURNAL_MODE": "bogus"}, {"VP_EMBEDDINGS": "magic"}, {"VP_TICK_SECONDS": "soon"}],
)
def test_settings_refuse_bad_values(env):
    with pytest.raises(InvalidArgument):
        Settings.from_env(env, dotenv=False)


@pytest.mark.parametrize(
    "text",
    ['"', '""', "AND OR NOT", "col:x*", "(((", "NEAR(", "a NEAR/3 b", "^start", "*", "🚀 emoji", "'; DROP TABLE x;--",
     "x" * 100_000, "\x00nul", "-neg", "+plus"],
)
def test_fts_query_never_breaks_fts5(text, tmp_path):
    db = Database(tmp_path / "f.db")
    db.conn.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    db.conn.execute("INSERT INTO t (body) VALUES ('AND OR NOT col x start emoji 🚀 neg plus')")
    for mode in ("and", "or"):
        q = fts_query(text, mode)
        if q is not None:
            db.conn.query("SELECT rowid FROM t WHERE t MATCH ?", (q,))  # must not raise
    db.close()


def test_fts_query_empty_and_punctuation():
    assert fts_query("") is None
    assert fts_query("   ") is None
    assert fts_query("!!! ...") is None
    assert fts_query('say "hi"') == '"say" "\"\"hi\"\""'
    assert fts_query("x b", "or") == '"x" OR "b"'
    assert fts_query("a b", "or") == '"b"'  # stopwords leave the any-word query


def test_clamp_limit():
    assert paging.clamp_limit(None) == 20
    assert paging.clamp_limit(0) == 1
    assert paging.clamp_limit(-5) == 1
    assert paging.clamp_limit(10_000) == 200
    assert paging.clamp_limit(None, default=15) == 15


def test_cursor_roundtrip_and_garbage():
    c = paging.encode_cursor(123, "msg_1")
    assert paging.decode_cursor(c) == (123, "msg_1")
    assert paging.decode_cursor(None) is None
    # The pre-keyset `{createdBefore}` cursor is no longer accepted (#18 removed that branch).
    legacy = paging.base64.urlsafe_b64encode(json.dumps({"createdBefore": 99}).encode()).decode()
    for bad in ("!!!", "bm90IGpzb24", paging.base64.urlsafe_b64encode(b"[1,2]").decode(), legacy):
        with pytest.raises(InvalidArgument):
            paging.decode_cursor(bad)


def _paging_db(tmp_path, n, size=10):
    db = Database(tmp_path / "p.db")
    db.conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, id TEXT UNIQUE, createdAt INTEGER, body TEXT)")
    # Many rows share one millisecond: the cursor must still neither skip nor repeat.
    db.conn.executemany(
        "INSERT INTO t (id, createdAt, body) VALUES (?, ?, ?)",
        [(f"t_{i:05d}", 1000 + i // 7, "x" * size) for i in range(n)],
    )
    return db


def _all_pages(db, **kw):
    seen, cursor, pages = [], None, 0
    while True:
        page = paging.keyset_page(db.conn, table="t", to_item=paging.to_doc, cursor=cursor, **kw)
        seen.extend(item["_id"] for item in page["items"])
        pages += 1
        if "nextCursor" not in page:
            return seen, pages
        assert page["nextCursor"] is not None
        cursor = page["nextCursor"]


def test_keyset_paging_full_chain(tmp_path):
    db = _paging_db(tmp_path, 137)
    seen, pages = _all_pages(db, limit=20)
    assert len(seen) == 137 and len(set(seen)) == 137
    assert seen == sorted(seen, reverse=True)
    assert pages == 7
    asc, _ = _all_pages(db, limit=50, descending=False)
    assert asc == sorted(asc)
    empty = paging.keyset_page(db.conn, table="t", to_item=paging.to_doc, where=["body = 'none'"])
    assert empty == {"items": []}
    db.close()


def test_keyset_paging_lite_and_postfilter(tmp_path):
    db = _paging_db(tmp_path, 30)
    page = paging.keyset_page(db.conn, table="t", to_item=paging.to_doc, fields="lite", limit=200)
    assert len(page["items"]) == 30 and set(page["items"][0]) == {"_id", "_creationTime"}
    kept, _ = _all_pages(db, limit=7, keep=lambda item: int(item["_id"][2:]) % 2 == 0)
    assert len(kept) == 15
    with pytest.raises(InvalidArgument):
        paging.keyset_page(db.conn, table="t", to_item=paging.to_doc, fields="medium")
    db.close()


def test_envelope_cap_halves_and_cursor_continues(tmp_path):
    db = _paging_db(tmp_path, 40, size=5_000)  # 40 × 5 KB rows: far over 50,000 bytes
    page = paging.keyset_page(db.conn, table="t", to_item=paging.to_doc, limit=40)
    body = json.dumps(page)
    assert len(body.encode()) <= ENVELOPE_TARGET_BYTES
    assert len(page["items"]) < 40 and "nextCursor" in page
    seen, _ = _all_pages(db, limit=40)
    assert len(seen) == 40 and len(set(seen)) == 40
    db.close()


def test_migrations_fresh_idempotent_and_stepwise(tmp_path):
    db = Database(tmp_path / "m.db")
    assert current_version(db) == 0
    assert migrate(db, target=1) == 1
    db.conn.execute("INSERT INTO meta (key, value) VALUES ('kept', 'yes')")
    assert migrate(db) == latest_version()
    assert migrate(db) == latest_version()
    assert db.conn.scalar("SELECT value FROM meta WHERE key = 'kept'") == "yes"
    assert db.conn.scalar("PRAGMA journal_mode") == "wal"
    assert db.conn.scalar("PRAGMA foreign_keys") == 1
    db.close()


def test_journal_mode_override(tmp_path):
    db = Database(tmp_path / "d.db", journal_mode="delete")
    migrate(db)
    assert db.conn.scalar("PRAGMA journal_mode") == "delete"
    db.close()


def test_write_rolls_back_on_error(tmp_path):
    db = Database(tmp_path / "r.db")
    migrate(db)

    def boom(c):
        c.execute("INSERT INTO meta (key, value) VALUES ('a', 'b')")
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        db.write(boom)
    assert db.conn.scalar("SELECT count(*) FROM meta WHERE key = 'a'") == 0
    assert db.write(lambda c: c.execute("INSERT INTO meta (key, value) VALUES ('a', 'b')")) == 1
    db.close()


def test_nested_transactions(tmp_path):
    db = Database(tmp_path / "n.db")
    migrate(db)

    def outer(c):
        db.write(lambda c2: c2.execute("INSERT INTO meta (key, value) VALUES ('inner', '1')"))
        c.execute("INSERT INTO meta (key, value) VALUES ('outer', '1')")

    db.write(outer)
    assert db.read(lambda c: c.scalar("SELECT count(*) FROM meta WHERE key IN ('inner', 'outer')")) == 2
    with pytest.raises(RuntimeError):
        db.read(lambda c: db.write(lambda c2: c2.execute("DELETE FROM meta")))
    assert db.conn.scalar("SELECT count(*) FROM meta") == 2
    db.close()


def test_scheduler_runs_jobs_under_lease_and_wakes_on_demand(tmp_path):
    from conftest import make_settings

    from vantage_peers.pipeline.scheduler import Scheduler
    from vantage_peers.server import create_app

    app = create_app(make_settings(tmp_path / "s.db", tick_seconds=3600))
    ran: list[str] = []
    woke = threading.Event()
    app.add_job("first", lambda: ran.append("first"))
    app.add_job("second", lambda: (ran.append("second"), woke.set()))
    app.add_job("broken", lambda: 1 / 0)
    sched = Scheduler(app)
    results = sched.run_once()
    assert ran[-2:] == ["first", "second"] and isinstance(results["broken"], ZeroDivisionError)
    # Another process holding a job's lease keeps this one from running it.
    from vantage_peers.pipeline.scheduler import try_lease
    assert app.db.write(lambda c: try_lease(c, "job:first", "someone-else", 60_000))
    ran.clear()
    sched.run_once({"first"})
    assert ran == []
    # The thread runs everything once at start, then sleeps a whole tick unless woken.
    sched.start()
    assert woke.wait(10)
    woke.clear()
    ran.clear()
    app.wake("second")
    assert woke.wait(10)  # long before the one-hour tick
    assert ran == ["second"]
    sched.stop()
    app.db.close()


def test_the_envelopes_quick_measure_answers_what_the_exact_one_does():
    """fit_envelope's shortcut (pydantic-core's size, under a third of the cap) never keeps more items
    than the exact `json` measure would: lists on both sides of the cap, numbers spelt differently by
    the two encoders, and text only `json` can encode (a lone surrogate) all fit as before."""
    from vantage_peers.core import envelope

    def exact(items):
        count = len(items)
        while count > 1 and envelope._size({"items": items[:count], "nextCursor": "x" * 64}) > ENVELOPE_TARGET_BYTES:
            count //= 2
        return count

    shapes = [
        [{"content": "é" * size, "n": i} for i in range(count)] for size in (10, 400, 2_000) for count in (3, 20, 60)
    ] + [
        [{"values": [1e-05, 1e22, float("-inf"), 5e-324] * 200} for _ in range(20)],
        [{"content": "\ud800" * 600} for _ in range(40)],  # pydantic-core refuses it: the exact measure decides
    ]
    quick = 0
    for items in shapes:
        assert envelope.fit_envelope(items) == exact(items)
        quick += envelope._surely_fits({"items": items, "nextCursor": "x" * 64})
    assert 0 < quick < len(shapes)  # both paths taken
