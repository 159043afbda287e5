"""search/pg_vectors.table_exists: in a read transaction a vector table and its sign-code table are looked
up in one statement and remembered for the rest of it; a write asks every time (it may create them)."""

from __future__ import annotations

import pytest

from vantage_peers.db import postgres
from vantage_peers.domains.memory import vectors
from vantage_peers.search import ann, pg_vectors

pytestmark = pytest.mark.parametrize("backend", ["postgres"], indirect=True)


def _counting(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = postgres.PgConnection._cursor

    def spy(self, sql, params):
        if "to_regclass" in sql:
            seen.append(sql)
        return real(self, sql, params)

    monkeypatch.setattr(postgres.PgConnection, "_cursor", spy)
    return seen


def test_a_read_asks_once_for_a_vector_table_and_its_bits_table(db, monkeypatch):
    seen = _counting(monkeypatch)
    bits = ann.bits_table(vectors.TABLE)
    assert db.read(lambda c: (pg_vectors.table_exists(c, vectors.TABLE), pg_vectors.table_exists(c, bits),
                              pg_vectors.table_exists(c, vectors.TABLE))) == (False, False, False)
    assert len(seen) == 1
    db.write(lambda c: (vectors.ensure(c, "m", 8), pg_vectors.table_exists(c, vectors.TABLE),
                        pg_vectors.table_exists(c, vectors.TABLE)))  # creates both: a write asks each time
    assert len(seen) >= 3
    seen.clear()
    assert db.read(lambda c: (pg_vectors.table_exists(c, bits), pg_vectors.table_exists(c, vectors.TABLE),
                              pg_vectors.table_exists(c, "no_such_table"))) == (True, True, False)
    assert len(seen) == 2  # the pair, then the other name; the next read asks again
    assert db.read(lambda c: pg_vectors.table_exists(c, vectors.TABLE)) and len(seen) == 3
