"""db/postgres.py `_plain`: values as SQLite gives them; the common types pass through unchecked."""

from __future__ import annotations

import decimal

import pytest

pytest.importorskip("psycopg")

from vantage_peers.db.postgres import _plain  # noqa: E402


def test_plain_values_keep_sqlites_types():
    assert [(_plain(v), type(_plain(v))) for v in (7, 1.5, "x", None)] == \
        [(7, int), (1.5, float), ("x", str), (None, type(None))]
    assert (_plain(True), type(_plain(True))) == (1, int) and (_plain(False), type(_plain(False))) == (0, int)
    assert (_plain(decimal.Decimal("3")), type(_plain(decimal.Decimal("3")))) == (3, int)
    assert _plain(decimal.Decimal("2.5")) == 2.5 and _plain(memoryview(b"ab")) == b"ab"
    assert _plain([1, 2]) == [1, 2]  # arrays as the driver gives them
