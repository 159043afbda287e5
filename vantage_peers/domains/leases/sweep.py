"""Expiry of every kind of lease, with its consequences: run by a scheduler job on every tick (in
every process: each row is marked expired by exactly one UPDATE, so the consequences run once) and
by the grants of each kind before they decide (lazy)."""

from __future__ import annotations

from ...db import Connection, Row
from ..tasks import claims
from . import store


def expire_due(conn: Connection, *, now: int, kind: str | None = None, scope: str | None = None,
               key: str | None = None) -> list[Row]:
    rows = store.expire_due(conn, now=now, kind=kind, scope=scope, key=key)
    for row in rows:
        if row["kind"] == "task":
            claims.on_expired(conn, row, now)
    return rows
