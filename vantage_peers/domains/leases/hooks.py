"""Hooks leases announce through: what happens when a lease of a kind lapses, and how the holder of
one renews it, registered by the domain that owns the kind (tasks own `task`: a lapsed claim puts
the task back to todo and tells its creator; renew_task_claim renews through tasks' checks).

Leases sit below every domain that holds one (docs/internals.md, "Domain order and seams"), so they
reach those domains only through here. A domain registers when its module loads (tasks/claims.py),
not per App: the sweep runs on a bare connection (the scheduler job, a read tool's lazy expiry, a
maintenance script), and whatever grants a lease of a kind has imported the module that owns it.
Kinds nobody registered (paths, slots) simply lapse.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ...db import Connection, Row

Lapse = Callable[[Connection, Row, int], None]


class Renew(Protocol):
    def __call__(self, conn: Connection, *, key: str, holder: str, now: int) -> dict[str, Any]: ...


_lapse: dict[str, Lapse] = {}
_renew: dict[str, Renew] = {}


def on_lapse(kind: str, fn: Lapse) -> None:
    """`fn(conn, row, now)` runs once per lease of `kind` the sweep marks expired, in its transaction."""
    _lapse[kind] = fn


def lapsed(conn: Connection, row: Row, now: int) -> None:
    fn = _lapse.get(row["kind"])
    if fn is not None:
        fn(conn, row, now)


def on_renew(kind: str, fn: Renew) -> None:
    """`fn(conn, key=, holder=, now=)` renews `holder`'s lease of `kind` on `key` (or raises why not)."""
    _renew[kind] = fn


def renew(conn: Connection, *, kind: str, key: str, holder: str, now: int) -> dict[str, Any]:
    fn = _renew.get(kind)
    if fn is None:
        raise RuntimeError(f"no domain renews leases of kind {kind!r}; its owner registers on_renew when imported")
    return fn(conn, key=key, holder=holder, now=now)
