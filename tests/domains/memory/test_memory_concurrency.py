"""Several OS processes on one file, and a file migrated from schema version 1."""

from __future__ import annotations

import multiprocessing

import pytest
from support.memory_helpers import child_store

from vantage_peers.core.ids import now_ms
from vantage_peers.db import Database, current_version, latest_version, migrate
from vantage_peers.domains.memory import store
from vantage_peers.domains.memory.search import text_search
from vantage_peers.domains.messaging import store as messaging
from vantage_peers.domains.profiles import store as profiles

pytestmark = pytest.mark.backends


@pytest.mark.slow
def test_two_processes_writing_memories_lose_nothing(db, db_target):
    # `db` (conftest) migrates the file up front, so the children race on writes, not on the first migration.
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=child_store, args=(db_target, name, 150)) for name in ("pi", "phi")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    rows = db.read(lambda c: c.query("SELECT createdBy, content FROM memories ORDER BY seq"))
    assert len(rows) == 300
    for name in ("pi", "phi"):
        mine = [r["content"] for r in rows if r["createdBy"] == name]
        assert sorted(mine) == sorted(f"concurrent note {name} number {i}" for i in range(150))
    assert db.read(lambda c: c.scalar("SELECT count(*) FROM embeddingJobs")) == 300
    assert db.read(lambda c: c.scalar("SELECT count(DISTINCT id) FROM memories")) == 300
    found = db.read(lambda c: text_search(c, query="concurrent note", scope=store.scope_of("shared/concurrency"),
                                          types=None, include_superseded=False, limit=200, now=now_ms()))
    assert found["items"] and found.get("truncated") is True  # 200 hits exceed the 50 KB envelope
    if db.backend == "sqlite":  # the FTS5 index itself, row for row
        assert db.read(lambda c: c.scalar("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'concurrent'")) == 300
    listed = db.read(lambda c: store.list_memories(c, scope=store.scope_of("shared/concurrency"), limit=200))
    assert len(listed["items"]) == 200 and "nextCursor" in listed


def test_file_at_schema_version_1_migrates_keeping_its_rows(db_path):
    db = Database(db_path)
    assert migrate(db, target=1) == 1 and current_version(db) == 1
    db.write(lambda c: profiles.ensure_profile(c, "sigma"))
    db.write(lambda c: profiles.ensure_profile(c, "pi"))
    sent = db.write(lambda c: messaging.send_message(c, sender="sigma", channel="pi", content="hello before v2"))
    assert db.read(lambda c: c.scalar("SELECT 1 FROM sqlite_master WHERE name = 'memories'")) is None
    db.close()

    db = Database(db_path)
    assert migrate(db) == latest_version() == current_version(db) >= 2
    assert db.read(lambda c: c.scalar("SELECT count(*) FROM profiles")) == 2
    msg = db.read(lambda c: messaging.get_message(c, message_id=sent["messageId"]))
    assert msg["content"] == "hello before v2"
    assert db.read(lambda c: messaging.search_messages(c, query="hello", limit=5))[0]["_id"] == sent["messageId"]
    mid = db.write(lambda c: store.store_memory(c, namespace="global", type="fact", content="after migration",
                                                created_by="sigma"))["memoryId"]
    assert db.read(lambda c: c.scalar("SELECT 1 FROM memories WHERE id = ?", (mid,))) == 1
    assert migrate(db) == latest_version()  # idempotent
    db.close()
