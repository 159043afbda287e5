"""Files at an older schema version, for the tests that prove a migration keeps existing data."""

from __future__ import annotations

from pathlib import Path

from vantage_peers.db import Database, migrate


def older_file(path: Path, version: int, *statements: str) -> Path:
    """A database file migrated only up to `version`, with `statements` run on it; closed again."""
    old = Database(path)
    assert migrate(old, target=version) == version
    for sql in statements:
        old.write(lambda c, sql=sql: c.execute(sql))
    old.close()
    return path
