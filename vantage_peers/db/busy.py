"""Lock contention, handled in one place: one wait budget per tool call, BUSY after it.

A tool call opens a `CallScope` (the app wrapper does; a bare `db.read`/`db.write` opens its own).
Every `BEGIN`, `COMMIT`, first SELECT and PRAGMA that meets `SQLITE_BUSY` is retried with jittered
backoff, and SQLite's own busy handler is given only what is left of the budget, so a call waits at
most `VP_BUSY_TIMEOUT_MS` in total before the agent reads `BUSY: … retry`.
The scope also carries the search time budget (see search/budget.py) and whether it was hit.

A quick call runs on the event loop (core/inline.py): there it must not wait for a lock, so a busy
database raises `WouldWait` until the call's scope has committed a write, and the pipeline runs the
call again on a worker thread, where waiting blocks nobody.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import apsw

from ..core import inline
from ..core.errors import Busy
from ..core.inline import WouldWait

T = TypeVar("T")
BUSY_ERRORS = (apsw.BusyError, apsw.LockedError)
_local = threading.local()


class CallScope:
    """The budgets of one call: lock waits (ms) and, once a search starts, its deadline."""

    def __init__(self, busy_budget_ms: int, search_budget_ms: int = 0) -> None:
        self.busy_budget_ms = max(0, int(busy_budget_ms))
        self.search_budget_ms = max(0, int(search_budget_ms))
        self.started = time.monotonic()
        self.deadline = self.started + self.busy_budget_ms / 1000
        self.search_deadline: float | None = None
        self.truncated = False  # a search stopped at its time budget: the reply says truncated
        self.committed = False  # a write of this call committed: an inline call can no longer start over

    def remaining_ms(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))

    def busy_error(self) -> Busy:
        return Busy(f"the database stayed locked by another process for {self.busy_budget_ms} ms "
                    "(VP_BUSY_TIMEOUT_MS); retry shortly")


def _no_wait(scope: CallScope) -> bool:
    """On the event loop and nothing committed yet: a lock wait would stall every other request."""
    return inline.active() and not scope.committed


def current_scope() -> CallScope | None:
    return getattr(_local, "scope", None)


@contextlib.contextmanager
def call_scope(busy_budget_ms: int, search_budget_ms: int = 0) -> Iterator[CallScope]:
    """The scope of the call in progress on this thread, or a new one for the duration."""
    outer = current_scope()
    if outer is not None:
        yield outer
        return
    scope = _local.scope = CallScope(busy_budget_ms, search_budget_ms)
    try:
        yield scope
    finally:
        _local.scope = None


@contextlib.contextmanager
def adopted(scope: CallScope | None) -> Iterator[None]:
    """This thread works inside another thread's call scope (a helper of that call: its budgets and
    `truncated` flag are the call's), then returns to its own."""
    previous = current_scope()
    _local.scope = scope
    try:
        yield
    finally:
        _local.scope = previous


def retry(fn: Callable[[], T], scope: CallScope, conn: Any = None,
          errors: tuple[type[BaseException], ...] = BUSY_ERRORS) -> T:
    """`fn()`, retried on SQLITE_BUSY (or the backend's `errors`) until the scope's budget is spent; then `Busy`."""
    delay = 0.002
    while True:
        left = scope.remaining_ms()
        no_wait = _no_wait(scope)
        if conn is not None:
            # SQLite's busy handler waits inside the statement: give it only what is left (none inline).
            conn.raw.set_busy_timeout(0 if no_wait else max(1, min(left, conn.busy_timeout_ms)))
        try:
            return fn()
        except errors:
            if no_wait:
                raise WouldWait from None
            left = scope.remaining_ms()
            if left <= 0:
                raise scope.busy_error() from None
            time.sleep(min(left / 1000, delay + random.random() * delay))
            delay = min(delay * 2, 0.1)
