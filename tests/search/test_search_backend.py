"""search/ chooses its backend once per database (search/backend.py, issue #33): `of(conn)` gives the
database's SearchBackend, resolved on the first call and remembered; budget, keyword, vectors and ann
call through it and no longer test the backend themselves."""

from __future__ import annotations

import inspect
import re

import pytest

from vantage_peers.search import ann, budget, keyword, pg_vectors, sqlite_vectors, vectors
from vantage_peers.search import backend as search_backend

pytestmark = pytest.mark.backends


def test_the_backend_matches_the_database(db, backend: str):
    chosen = db.read(lambda c: backend_of(c))
    assert chosen.name == backend
    assert chosen.vectors is (pg_vectors if backend == "postgres" else sqlite_vectors)
    assert ("BYTEA" if backend == "postgres" else "seq INTEGER PRIMARY KEY") in chosen.bits_columns
    assert chosen.table_exists is chosen.vectors.table_exists and chosen.has_column is chosen.vectors.has_column
    assert chosen.budget_needs_transaction is (backend == "postgres")


def backend_of(conn):
    return search_backend.of(conn)


def test_it_is_resolved_once_per_database(db, backend: str, monkeypatch: pytest.MonkeyPatch):
    first = db.read(backend_of)
    calls: list[str] = []
    real = search_backend._build

    def counting(name: str):
        calls.append(name)
        return real(name)

    monkeypatch.setattr(search_backend, "_build", counting)
    # Later transactions (on PostgreSQL each has a new connection object) reuse what was resolved.
    for _ in range(3):
        assert db.read(backend_of) is first
        assert db.write(backend_of) is first
    assert calls == []


def test_another_database_resolves_its_own(db, tmp_path, monkeypatch: pytest.MonkeyPatch):
    from vantage_peers.db import Database, migrate

    other = Database(tmp_path / "other.db")
    try:
        migrate(other)
        calls: list[str] = []
        real = search_backend._build
        monkeypatch.setattr(search_backend, "_build", lambda name: calls.append(name) or real(name))
        assert other.read(backend_of).name == "sqlite"
        assert other.read(backend_of).name == "sqlite"
        assert calls == ["sqlite"]
    finally:
        other.close()


@pytest.mark.sqlite_only
def test_the_search_modules_no_longer_branch_on_the_backend():
    for module in (ann, budget, keyword, vectors):
        code = re.sub(r'"""[\s\S]*?"""|#[^\n]*', "", inspect.getsource(module))
        assert not re.search(r"\.backend\b|== \"postgres\"|_is_pg|_pg\(", code), module.__name__


def test_keyword_search_and_vectors_still_work_through_it(db, backend: str):
    """One keyword query (under the budget) and a vector round trip on this backend."""
    from vantage_peers.search.vectors import VecTable

    table = VecTable(name="probe_vec", label="probe", columns_ddl="part TEXT", columns=("part",))

    def run(conn):
        conn.execute("INSERT INTO messages (id, sender, channel, content, createdAt) "
                     "VALUES ('msg_1', 'a', 'general', 'deploying the release', 1)")
        rows = keyword.keyword_rows(conn, fts="messages_fts", table="messages", match='"deploy"', limit=5,
                                    columns="d.id")
        vectors.ensure(conn, "probe-model", 3, table)
        vectors.replace(conn, table, [(1, ("p",), [1.0, 0.0, 0.0]), (2, ("p",), [0.0, 1.0, 0.0])])
        near = vectors.nearest(conn, table, [0.9, 0.1, 0.0], k=1)
        exists = vectors.table_exists(conn, table)
        vectors.drop(conn, [table])
        return rows, near, exists, vectors.table_exists(conn, table)

    if db.read(lambda c: c.vec_version) is None:
        pytest.skip("no vector extension here")
    rows, near, exists, after = db.write(run)
    assert [r["id"] for r in rows] == ["msg_1"]
    assert [seq for seq, _ in near] == [1] and exists and not after
