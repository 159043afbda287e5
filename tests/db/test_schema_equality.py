"""One schema, two backends (issue #33): PostgreSQL's schema is translated from SQLite's
(db/pgschema.py), and these tests hold the result to it.

- A migrated SQLite file and a migrated PostgreSQL database have the same tables, columns (name,
  nullability, type class), primary keys, unique and foreign-key constraints, CHECKs, indexes
  (name, columns, uniqueness, partial or not) and full-text indexes; only the indexes declared in
  `pg/additions/` are PostgreSQL's own. A new SQLite migration whose translation differs fails here.
- The translation gives exactly what the hand-written PostgreSQL schema it replaced gave (types,
  defaults, identities, CHECK and index definitions, triggers, functions), at version 13 (that file's
  version, where older PostgreSQL databases start) and at version 21 (its last migration):
  `snapshots/pg_schema_v*.json` were introspected from the old code before it was deleted.
- A database at any version PostgreSQL databases were made at upgrades to the fresh shape.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support import postgres
from support.schema_shape import shape_of

from vantage_peers.db import Database, latest_version, migrate
from vantage_peers.db.pgschema import additions
from vantage_peers.db.postgres import PgDatabase

pytestmark = [pytest.mark.postgres,
              pytest.mark.skipif(postgres.available() is not None, reason=str(postgres.available()))]

SNAPSHOTS = Path(__file__).parent / "snapshots"
OLD_VERSIONS = (13, 16, 18, 19, 20)  # the versions a PostgreSQL database could be at before issue #33


def _pg_shape(target: int | None = None, *, exact: bool = False, recorded_from: int | None = None,
              then_latest: bool = False) -> dict:
    """The shape of a fresh PostgreSQL database migrated to `target`; `recorded_from`: its vp_schema
    rewritten to start at that version, as the old baseline recorded it; `then_latest`: then upgraded."""
    url = postgres.fresh_database(migrated=False)
    db = PgDatabase(url, pool_size=1)
    try:
        assert migrate(db, target=target) == (target or latest_version())
        if recorded_from is not None:
            db.write(lambda c: c.execute("DELETE FROM vp_schema WHERE version < ?", (recorded_from,)))
        if then_latest:
            assert migrate(db) == latest_version()
        return json.loads(json.dumps(shape_of(db, exact=exact)))  # tuples as lists, as in the snapshots
    finally:
        db.close()
        postgres.drop_database(url)


def _pg_only_indexes() -> set[str]:
    return {m.group(1).lower() for _, sql in additions().values()
            for m in re.finditer(r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+(\w+)", sql, re.IGNORECASE)}


def _differences(a: object, b: object, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _differences(a.get(k), b.get(k), f"{path}/{k}")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def test_sqlite_and_postgresql_have_the_same_schema(tmp_path: Path):
    sqlite = Database(tmp_path / "shape.db")
    try:
        migrate(sqlite)
        lite = shape_of(sqlite)
    finally:
        sqlite.close()
    pg = _pg_shape()
    extra = _pg_only_indexes()
    assert extra and extra <= set(pg["indexes"])
    pg["indexes"] = {name: v for name, v in pg["indexes"].items() if name not in extra}
    lite = json.loads(json.dumps(lite))
    assert len(lite["tables"]) > 40 and len(lite["fts"]) == 6
    assert _differences(lite, pg) == []


@pytest.mark.parametrize("version", [13, 21])
def test_the_translation_gives_the_hand_written_schema(version: int):
    snapshot = json.loads((SNAPSHOTS / f"pg_schema_v{version}.json").read_text(encoding="utf-8"))
    assert _differences(_pg_shape(version, exact=True), snapshot) == []


@pytest.mark.slow
@pytest.mark.parametrize("version", OLD_VERSIONS)
def test_an_older_postgres_database_upgrades_to_the_fresh_shape(version: int):
    fresh = _pg_shape(exact=True)
    assert _differences(_pg_shape(version, exact=True, recorded_from=version, then_latest=True), fresh) == []
