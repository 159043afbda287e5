"""The PostgreSQL schema against SQLite's (issue #25): the same tables and columns at the latest version,
and a database at an older version upgraded without losing its rows."""

from __future__ import annotations

import pytest
from support import postgres

from vantage_peers.db import current_version, latest_version, migrate
from vantage_peers.db.postgres import PgDatabase
from vantage_peers.db.transfer import schema_tables

OLD_BASELINE = 13  # databases made before issue #33 started here, from a hand-written schema file
pytestmark = [pytest.mark.postgres,
              pytest.mark.skipif(postgres.available() is not None, reason=str(postgres.available()))]


def _sqlite_columns() -> dict[str, set[str]]:
    """Every table of SQLite's latest schema and its stored columns, as `migrate-db` copies them."""
    return {spec.name.lower(): {c.lower() for c in spec.columns} for spec in schema_tables()}


def _pg_columns(db: PgDatabase) -> dict[str, set[str]]:
    rows = db.read(lambda c: c.rows("SELECT table_name, column_name FROM information_schema.columns "
                                    "WHERE table_schema = 'public'"))
    out: dict[str, set[str]] = {}
    for table, column in rows:
        out.setdefault(table, set()).add(column)
    return out


def test_postgres_has_every_table_and_column_of_sqlite():
    url = postgres.fresh_database(migrated=False)
    db = PgDatabase(url, pool_size=2)
    try:
        assert migrate(db) == latest_version() == current_version(db)
        pg = _pg_columns(db)
        for table, columns in _sqlite_columns().items():
            assert table in pg, f"table {table} is missing on PostgreSQL"
            assert columns <= pg[table], (table, columns - pg[table])
    finally:
        db.close()
        postgres.drop_database(url)


def test_an_older_postgres_database_is_upgraded_keeping_its_rows():
    url = postgres.fresh_database(migrated=False)
    old = PgDatabase(url, pool_size=2)
    try:
        assert migrate(old, target=OLD_BASELINE) == OLD_BASELINE
        # As a database made by the hand-written baseline records it (its shape at 13 is the same:
        # test_schema_equality.py): one row, version 13.
        old.write(lambda c: c.execute("DELETE FROM vp_schema WHERE version < ?", (OLD_BASELINE,)))
        old.write(lambda c: c.execute(
            "INSERT INTO tasks (id, title, status, priority, assignedTo, createdBy, createdAt, updatedAt) "
            "VALUES ('tsk_old', 'kept across the upgrade', 'todo', 'high', 'bob', 'alice', 1, 1)"))
        assert old.read(lambda c: c.scalar("SELECT to_regclass('idempotencykeys') IS NULL")) == 1
        old.close()
        # Several processes opening an old database at once: the advisory lock lets one migrate.
        new = PgDatabase(url, pool_size=2)
        assert migrate(new) == latest_version()
        assert migrate(new) == latest_version()  # a second run finds nothing to do
        row = new.read(lambda c: c.one("SELECT title, priority FROM tasks WHERE id = 'tsk_old'"))
        assert row == {"title": "kept across the upgrade", "priority": "high"}
        versions = new.read(lambda c: [r[0] for r in c.rows("SELECT version FROM vp_schema ORDER BY version")])
        assert versions[0] == OLD_BASELINE and versions[-1] == latest_version() and versions == sorted(set(versions))
        new.write(lambda c: c.execute("INSERT INTO idempotencyKeys (caller, key, tool, payloadHash, result, "
                                      "createdAt) VALUES ('a', 'k', 't', 'h', '{}', 1)"))
        new.close()
    finally:
        postgres.drop_database(url)


def test_rows_come_back_under_sqlites_spelling_for_every_column():
    """`SELECT *` on PostgreSQL returns each column under the camelCase name SQLite gives it, also for
    columns added by a migration after the baseline (tasks.lapsedAt came back as `lapsedat`)."""
    from vantage_peers.db.postgres import _schema_names

    names = _schema_names()
    for spec in schema_tables():
        for column in spec.columns:
            assert names.get(column.lower(), column.lower()) == column, (spec.name, column)
