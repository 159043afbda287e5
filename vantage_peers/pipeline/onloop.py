"""Where a quick tool's call runs: on the event loop when the database allows it (docs/policy.md).

The worker-thread hop of a sync tool (there and back, ~0.2 ms) cost more than the database work of
the calls agents make most. A tool declared `quick=True` does only local database work, so on SQLite
it runs on the loop; a locked file (or work that may block, `core.inline.off_loop`) before anything
committed raises `WouldWait`, and the call starts over on a worker thread, where waiting blocks no
other request. PostgreSQL (`runs_inline` False) always takes the worker thread.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import anyio.to_thread

from ..db import WouldWait
from .host import Host as App


def on_loop(app: App, fn: Callable[..., Any], run: Callable[..., Any],
            restart: Callable[[], None]) -> Callable[..., Any]:
    """An async runner for `run` (the pipeline's sync runner of `fn`); `restart` forgets what a first
    attempt reported (its warnings and notices) before the call runs again."""

    @functools.wraps(fn)
    async def quick(**kwargs: Any) -> Any:
        if app.db.runs_inline:
            try:
                with app.db.inline():
                    return run(**kwargs)
            except WouldWait:
                restart()
        return await anyio.to_thread.run_sync(functools.partial(run, **kwargs))

    return quick
