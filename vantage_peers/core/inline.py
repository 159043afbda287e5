"""Whether this thread is running a quick call on the event loop (pipeline/onloop.py), stdlib only:
`off_loop` is called from light modules (the git guard's repository lookup) that must not import
the database layer.

On the loop a call must not wait. Until the call has committed a write, a locked database
(db/busy.py) or work that may block (`off_loop`) raises `WouldWait`, and the pipeline runs the call
again, from its start, on a worker thread. After a commit it cannot start over: it goes on where it is.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

_local = threading.local()


class WouldWait(BaseException):
    """A quick call on the event loop would wait: run it on a worker thread. A BaseException, so that
    no body's or hook's `except Exception` takes it for a failure."""


@contextlib.contextmanager
def running() -> Iterator[None]:
    """This thread (the event loop) runs one quick call."""
    _local.on, _local.committed = True, False
    try:
        yield
    finally:
        _local.on = _local.committed = False


def active() -> bool:
    return getattr(_local, "on", False)


def note_commit() -> None:
    """A write of the running call committed (db/connection.py): from now on it stays where it is."""
    if active():
        _local.committed = True


def off_loop() -> None:
    """Before work that may block (a subprocess, a model): a quick call on the loop that has committed
    nothing moves to a worker thread; anywhere else this does nothing."""
    if active() and not getattr(_local, "committed", False):
        raise WouldWait
