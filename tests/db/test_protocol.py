"""Both backends implement the declared `DatabaseAPI` / `ConnectionAPI` (db/protocol.py, issue #33):
every method of the protocol exists on both classes with the same parameters (names, kinds, defaults),
and every declared attribute is there on a live instance."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from support import postgres

from vantage_peers.db import Database, migrate
from vantage_peers.db.connection import Connection
from vantage_peers.db.postgres import PgConnection, PgDatabase
from vantage_peers.db.protocol import ConnectionAPI, DatabaseAPI


def _members(protocol: type) -> tuple[dict[str, Any], set[str]]:
    """(methods by name, attribute names) the protocol declares."""
    methods = {name: value for name, value in vars(protocol).items()
               if not name.startswith("_") and (callable(value) or isinstance(value, property))}
    attributes = set(getattr(protocol, "__annotations__", {})) - set(methods)
    return methods, attributes


def _parameters(fn: Any) -> list[tuple[str, Any, Any]]:
    params = list(inspect.signature(fn).parameters.values())[1:]  # without self
    return [(p.name, p.kind, p.default) for p in params]


@pytest.mark.parametrize("protocol, classes", [
    (DatabaseAPI, (Database, PgDatabase)),
    (ConnectionAPI, (Connection, PgConnection)),
])
def test_every_method_has_the_protocols_signature(protocol: type, classes: tuple[type, ...]):
    methods, _ = _members(protocol)
    assert {"write", "read", "close"} <= set(methods) or {"query", "execute", "script"} <= set(methods)
    for cls in classes:
        for name, declared in methods.items():
            implemented = getattr(cls, name, None)
            assert implemented is not None, f"{cls.__name__} has no {name}"
            if isinstance(declared, property):
                assert isinstance(implemented, property), f"{cls.__name__}.{name} is not a property"
                continue
            assert _parameters(implemented) == _parameters(declared), f"{cls.__name__}.{name}"


def test_a_signature_that_drifts_is_caught():
    class Drifted:
        def write(self, fn, retries=3): ...

    assert _parameters(Drifted.write) != _parameters(DatabaseAPI.write)


def _check_instance(db: Any) -> None:
    _, attributes = _members(DatabaseAPI)
    missing = [a for a in attributes if not hasattr(db, a)]
    assert missing == [] and isinstance(db, DatabaseAPI)

    def inside(conn: Any) -> None:
        _, conn_attributes = _members(ConnectionAPI)
        assert [a for a in conn_attributes if not hasattr(conn, a)] == []
        assert isinstance(conn, ConnectionAPI)

    db.read(inside)


def test_a_sqlite_database_has_every_declared_attribute(tmp_path: Path):
    db = Database(tmp_path / "p.db")
    try:
        migrate(db)
        _check_instance(db)
    finally:
        db.close()


@pytest.mark.postgres
@pytest.mark.skipif(postgres.available() is not None, reason=str(postgres.available()))
def test_a_postgres_database_has_every_declared_attribute():
    url = postgres.fresh_database()
    db = PgDatabase(url, pool_size=2)  # isinstance() reads `conn`, which keeps one pooled connection
    try:
        _check_instance(db)
    finally:
        db.close()
        postgres.drop_database(url)
