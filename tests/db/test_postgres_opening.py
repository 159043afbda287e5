"""PostgreSQL transactions open with their first statement (issue #34): BEGIN and the lock timeout go in
the same round trip as the first query, and a transaction that runs nothing sends nothing. The
isolation and the rollback are what they were: the tests below fail if the opening is lost or late."""

from __future__ import annotations

import contextlib
from typing import Any

import psycopg
import pytest
from support import postgres

from vantage_peers.db import postgres as pg
from vantage_peers.db.postgres import PgDatabase

pytestmark = [pytest.mark.postgres,
              pytest.mark.skipif(postgres.available() is not None, reason=str(postgres.available()))]


class _Recorder:
    """The pooled psycopg connection, with each `execute` it is sent recorded as (statement, in a pipeline)."""

    def __init__(self, raw: Any, log: list[tuple[str, bool]]) -> None:
        self._raw, self._log, self._depth = raw, log, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)

    def execute(self, sql: Any, *args: Any, **kwargs: Any) -> Any:
        self._log.append((str(sql), self._depth > 0))
        return self._raw.execute(sql, *args, **kwargs)

    @contextlib.contextmanager
    def pipeline(self) -> Any:
        with self._raw.pipeline() as p:
            self._depth += 1
            try:
                yield p
            finally:
                self._depth -= 1


@pytest.fixture
def recorded(monkeypatch):
    url = postgres.fresh_database()
    db = PgDatabase(url, busy_timeout_ms=10_000)
    log: list[tuple[str, bool]] = []
    init = pg.PgConnection.__init__

    def wrapped(self, raw, owner):
        init(self, _Recorder(raw, log), owner)

    monkeypatch.setattr(pg.PgConnection, "__init__", wrapped)
    db.write(lambda c: c.execute("CREATE TABLE t (k TEXT PRIMARY KEY)"))
    log.clear()
    try:
        yield db, log, url
    finally:
        db.close()
        postgres.drop_database(url)


def test_the_opening_goes_with_the_first_statement_and_an_empty_transaction_sends_nothing(recorded):
    db, log, _ = recorded
    assert db.read(lambda c: c.rows("SELECT count(*) FROM t")) == [(0,)]
    begins = [(sql, piped) for sql, piped in log if sql.startswith("BEGIN")]
    assert begins == [("BEGIN ISOLATION LEVEL REPEATABLE READ", True)]  # in the statement's pipeline
    assert [sql for sql, piped in log if not piped] == ["COMMIT"]  # the only round trip of its own
    log.clear()
    assert db.read(lambda c: None) is None and db.write(lambda c: 1) == 1
    assert log == []


def test_a_read_sees_one_snapshot_from_its_first_statement(recorded):
    db, _, url = recorded

    def twice(c):
        first = c.rows("SELECT count(*) FROM t")[0][0]
        with psycopg.connect(url, autocommit=True) as other:
            other.execute("INSERT INTO t (k) VALUES ('meanwhile')")
        return first, c.rows("SELECT count(*) FROM t")[0][0]

    assert db.read(twice) == (0, 0)  # without the opening, the second count would see the row
    assert db.read(lambda c: c.rows("SELECT count(*) FROM t")[0][0]) == 1


@pytest.mark.parametrize("first", ["execute", "raw", "savepoint", "search"])
def test_a_write_that_fails_after_its_first_statement_leaves_nothing(recorded, first):
    db, log, _ = recorded

    def doomed(c):
        if first == "execute":
            c.execute("INSERT INTO t (k) VALUES ('a')")
        elif first == "raw":  # the psycopg connection reached directly (COPY, named cursors): opened first
            c.raw.execute("INSERT INTO t (k) VALUES ('a')")
        elif first == "savepoint":
            with c.savepoint("vp_test"):
                c.execute("INSERT INTO t (k) VALUES ('a')")
        else:  # a search statement: savepoint and timeout in its own pipeline
            from vantage_peers.search import budget

            budget.query(c, "SELECT k FROM t", [])
            c.execute("INSERT INTO t (k) VALUES ('a')")
        raise RuntimeError("refused")

    with pytest.raises(RuntimeError):
        db.write(doomed)
    assert db.read(lambda c: c.rows("SELECT count(*) FROM t")) == [(0,)]
    assert any(sql.startswith("BEGIN ISOLATION LEVEL SERIALIZABLE") for sql, _ in log)
    assert ("ROLLBACK", False) in log


def test_a_call_refused_before_its_first_statement_sends_nothing_and_the_connection_serves_on(recorded):
    db, log, _ = recorded

    def refused(c):
        raise ValueError("bad argument")

    with pytest.raises(ValueError):
        db.write(refused)
    assert log == []
    db.write(lambda c: c.execute("INSERT INTO t (k) VALUES ('b')"))
    assert db.read(lambda c: c.rows("SELECT k FROM t")) == [("b",)]


def test_a_duplicate_key_on_the_first_statement_is_the_same_error(recorded):
    db, _, _ = recorded
    db.write(lambda c: c.execute("INSERT INTO t (k) VALUES ('taken')"))
    with pytest.raises(psycopg.errors.UniqueViolation):
        db.write(lambda c: c.execute("INSERT INTO t (k) VALUES ('taken')"))
    with pytest.raises(Exception) as info:
        db.write(lambda c: c.execute("INSERT INTO t (k) VALUES (?)", ["nul\x00byte"]))
    assert getattr(info.value, "code", None) == "INVALID_ARGUMENT"
    assert db.read(lambda c: c.rows("SELECT k FROM t ORDER BY k")) == [("taken",)]
