"""Expiry of every kind of lease, with its consequences: run by a scheduler job on every tick (in
every process: each row is marked expired by exactly one UPDATE, so the consequences run once) and
by the grants of each kind before they decide (lazy)."""

from __future__ import annotations

from ...db import Connection, Database, Row
from . import hooks, store


def expire_due(conn: Connection, *, now: int, kind: str | None = None, scope: str | None = None,
               key: str | None = None) -> list[Row]:
    rows = store.expire_due(conn, now=now, kind=kind, scope=scope, key=key)
    for row in rows:
        hooks.lapsed(conn, row, now)  # the owner of the kind acts on it (tasks: the claim's task)
    return rows


def any_due(conn: Connection, now: int) -> bool:
    return conn.scalar("SELECT 1 FROM agentLeases WHERE releasedAt IS NULL AND expiresAt <= ? LIMIT 1",
                       (now,)) is not None


def before_read(db: Database, now: int) -> None:
    """Lazy expiry for the read tools: one indexed read, and a write only when a lease is due, so a
    listing never shows a task still claimed by a holder whose claim has lapsed."""
    if db.read(lambda c: any_due(c, now)):
        db.write(lambda c: expire_due(c, now=now))
