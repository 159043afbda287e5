"""Expiry of every kind of lease, with its consequences: run by a scheduler job on every tick (in
every process: each row is marked expired by exactly one UPDATE, so the consequences run once) and
by the grants of each kind before they decide (lazy)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ...db import Connection, Database, Row
from . import hooks, store

T = TypeVar("T")


def expire_due(conn: Connection, *, now: int, kind: str | None = None, scope: str | None = None,
               key: str | None = None) -> list[Row]:
    rows = store.expire_due(conn, now=now, kind=kind, scope=scope, key=key)
    for row in rows:
        hooks.lapsed(conn, row, now)  # the owner of the kind acts on it (tasks: the claim's task)
    return rows


def any_due(conn: Connection, now: int) -> bool:
    return conn.scalar("SELECT 1 FROM agentLeases WHERE releasedAt IS NULL AND expiresAt <= ? LIMIT 1",
                       (now,)) is not None


class _Due:
    """What the read answers instead of its result when a lease was due (read_after_expiry)."""


def read_after_expiry(db: Database, now: int, fn: Callable[[Connection], T]) -> T:
    """`db.read(fn)` after the lazy expiry of the read tools, so a listing never shows a task still
    claimed by a holder whose claim has lapsed. The check is the read's own first statement: one
    transaction when nothing is due, the usual case (on PostgreSQL a transaction is two round trips).
    When a lease is due, that read stops there, the expiry is written, and `fn` reads again."""
    out = db.read(lambda c: _Due() if any_due(c, now) else fn(c))
    if not isinstance(out, _Due):
        return out
    db.write(lambda c: expire_due(c, now=now))
    return db.read(fn)
