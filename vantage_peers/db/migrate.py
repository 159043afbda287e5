"""Schema versions: `schema.sql` is version 1; `migrations/NNN_name.sql` are the steps after it.

`PRAGMA user_version` records the version. Migrating runs under `BEGIN IMMEDIATE`, so when
several processes open a new file at once exactly one of them applies each step.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from .connection import Database

_STEP = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")


def schema_sql() -> str:
    packaged = resources.files("vantage_peers").joinpath("schema.sql")
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    # Source checkout: schema.sql sits at the repository root.
    return (Path(__file__).resolve().parents[2] / "schema.sql").read_text(encoding="utf-8")


def steps() -> list[tuple[int, str, str]]:
    """(version, name, sql) for every numbered migration, in order."""
    found = []
    for entry in resources.files("vantage_peers.db").joinpath("migrations").iterdir():
        m = _STEP.match(entry.name)
        if m:
            found.append((int(m.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions) or (versions and versions[0] < 2):
        raise RuntimeError(f"migration numbers must be unique and start at 002: {versions}")
    return found


def latest_version() -> int:
    found = steps()
    return found[-1][0] if found else 1


def current_version(db: Database) -> int:
    return int(db.conn.scalar("PRAGMA user_version"))


def migrate(db: Database, *, target: int | None = None) -> int:
    """Bring the file up to `target` (default: latest). Returns the version reached."""
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
