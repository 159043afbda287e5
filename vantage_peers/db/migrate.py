"""Schema versions, for both backends, numbered alike.

SQLite: `schema.sql` is version 1; `migrations/NNN_name.sql` are the steps after it; `PRAGMA
user_version` records the version. Migrating runs under `BEGIN IMMEDIATE`, so when several processes
open a new file at once exactly one of them applies each step.

PostgreSQL: the same steps, translated from SQLite's at migrate time (db/pgschema.py), with
`pg/prelude.sql` before step 1 and `pg/additions/NNN_*.sql` after step NNN; the table `vp_schema`
records the version. A transaction-scoped advisory lock plays the part of `BEGIN IMMEDIATE`. Databases
made before the translation (issue #33) started at version 13 from a hand-written baseline with the
same tables, columns, indexes and constraints (tests/db/snapshots): they go on from there.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path
from typing import Any

from .protocol import ConnectionAPI, DatabaseAPI

_STEP = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")
_PG_LOCK = 0x7670_6d69  # 'vpmi': the advisory lock key migrations serialize on


def schema_sql() -> str:
    packaged = resources.files("vantage_peers").joinpath("schema.sql")
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    # Source checkout: schema.sql sits at the repository root.
    return (Path(__file__).resolve().parents[2] / "schema.sql").read_text(encoding="utf-8")


def _steps(folder: Any) -> list[tuple[int, str, str]]:
    found = []
    for entry in folder.iterdir():
        m = _STEP.match(entry.name)
        if m:
            found.append((int(m.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions) or (versions and versions[0] < 2):
        raise RuntimeError(f"migration numbers must be unique and start at 002: {versions}")
    return found


def steps() -> list[tuple[int, str, str]]:
    """(version, name, sql) for every numbered SQLite migration, in order."""
    return _steps(resources.files("vantage_peers.db").joinpath("migrations"))


@functools.lru_cache(maxsize=1)
def pg_steps() -> list[tuple[int, str, str]]:
    """(version, name, sql): SQLite's steps in PostgreSQL's dialect (an `Untranslatable` statement fails here)."""
    from .pgschema import postgres_steps

    return postgres_steps([(1, "schema.sql", schema_sql()), *steps()])


def latest_version() -> int:
    found = steps()
    return found[-1][0] if found else 1


def _is_pg(db: DatabaseAPI) -> bool:
    return getattr(db, "backend", "sqlite") == "postgres"


def _pg_version(conn: ConnectionAPI) -> int:
    if conn.scalar("SELECT to_regclass('vp_schema') IS NOT NULL") == 0:
        return 0
    return int(conn.scalar("SELECT coalesce(max(version), 0) FROM vp_schema") or 0)


def current_version(db: DatabaseAPI) -> int:
    if _is_pg(db):
        return db.read(_pg_version)
    return int(db.conn.scalar("PRAGMA user_version"))


def migrate(db: DatabaseAPI, *, target: int | None = None) -> int:
    """Bring the database up to `target` (default: latest). Returns the version reached."""
    if _is_pg(db):
        return _migrate_pg(db, target)
    all_steps = [(1, "schema.sql", schema_sql()), *steps()]
    goal = target if target is not None else all_steps[-1][0]
    if current_version(db) >= goal:
        return current_version(db)

    def run(conn) -> int:
        version = int(conn.scalar("PRAGMA user_version"))
        for number, _name, sql in all_steps:
            if version < number <= goal:
                conn.raw.execute(sql)
                conn.raw.execute(f"PRAGMA user_version={number}")
                version = number
        return version

    return db.write(run)


def _migrate_pg(db: DatabaseAPI, target: int | None) -> int:
    all_steps = pg_steps()
    goal = target if target is not None else all_steps[-1][0]

    def run(conn) -> int:
        conn.execute(f"SELECT pg_advisory_xact_lock({_PG_LOCK})")
        version = _pg_version(conn)
        if version == 0:
            conn.script("CREATE TABLE IF NOT EXISTS vp_schema (version INTEGER NOT NULL, appliedAt BIGINT NOT NULL)")
        for number, _name, sql in all_steps:
            if version < number <= goal:
                conn.script(sql)
                conn.execute("INSERT INTO vp_schema (version, appliedAt) "
                             "VALUES (?, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)", (number,))
                version = number
        return version

    return db.write(run)
