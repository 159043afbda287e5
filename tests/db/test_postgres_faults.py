"""PostgreSQL faults (issue #25): a dropped connection is reopened and the transaction run again; a
server that cannot be reached is a coded error that says what to check, never INTERNAL_ERROR."""

from __future__ import annotations

import psycopg
import pytest
from conftest import make_settings, open_tools
from support import postgres

from vantage_peers.db.faults import storage_error
from vantage_peers.db.postgres import PgDatabase, PostgresUnavailable
from vantage_peers.server import create_app

pytestmark = [pytest.mark.postgres,
              pytest.mark.skipif(postgres.available() is not None, reason=str(postgres.available()))]


def _terminate_sessions(url: str) -> int:
    from psycopg.conninfo import conninfo_to_dict

    name = conninfo_to_dict(url)["dbname"]
    with psycopg.connect(postgres.server_uri(), autocommit=True) as admin:
        rows = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        return len(rows.fetchall())


def test_connections_killed_by_the_server_are_replaced_without_losing_the_call(tmp_path):
    url = postgres.fresh_database()
    app = create_app(make_settings(tmp_path / "unused.db", database_url=url))
    try:
        with open_tools(app) as tools:
            tools.call("send_message", **{"from": "alice", "channel": "bob", "content": "before"})
            assert _terminate_sessions(url) >= 1  # a restart or failover drops every pooled connection
            tools.call("send_message", **{"from": "alice", "channel": "bob", "content": "after"})
            got = tools.call("check_messages", recipient="bob")
            assert sorted(m["content"] for m in got) == ["after", "before"]
    finally:
        app.db.close()
        postgres.drop_database(url)


def test_an_unreachable_server_is_a_coded_error(tmp_path):
    with pytest.raises(PostgresUnavailable) as info:
        PgDatabase(f"postgresql://nobody@/vp?host={tmp_path}", busy_timeout_ms=100)
    assert info.value.code == "STORAGE_IO" and "VP_DATABASE_URL" in str(info.value)
    mapped = storage_error(psycopg.OperationalError("server closed the connection unexpectedly"))
    assert mapped is not None and mapped.code == "STORAGE_IO" and "PostgreSQL" in str(mapped)


def test_a_unique_key_taken_by_a_concurrent_insert_runs_the_transaction_again(tmp_path):
    """PostgreSQL may report a concurrent insert of the same key as unique_violation rather than a
    serialization failure: the write runs again (and then sees the row); a key that stays taken is still
    the duplicate error after a bounded number of runs, never BUSY."""
    from vantage_peers.db.postgres import UNIQUE_RETRIES

    url = postgres.fresh_database()
    db = PgDatabase(url, busy_timeout_ms=10_000)
    try:
        db.write(lambda c: c.execute("CREATE TABLE uniq (k TEXT PRIMARY KEY, n INTEGER)"))
        db.write(lambda c: c.execute("INSERT INTO uniq (k, n) VALUES ('shared', 1)"))
        runs = []

        def register(c):  # as if it had read "absent" before the other process committed
            runs.append(1)
            if len(runs) == 1:
                c.execute("INSERT INTO uniq (k, n) VALUES ('shared', 2)")
            return c.query("SELECT n FROM uniq WHERE k = 'shared'")[0]["n"]

        assert db.write(register) == 1 and len(runs) == 2
        runs.clear()

        def duplicate(c):
            runs.append(1)
            c.execute("INSERT INTO uniq (k, n) VALUES ('shared', 3)")

        with pytest.raises(psycopg.errors.UniqueViolation):
            db.write(duplicate)
        assert len(runs) == UNIQUE_RETRIES + 1
    finally:
        db.close()
        postgres.drop_database(url)
