"""The live stream: server-sent events that say "the file changed", from one Watcher per process.

One asyncio task polls `Watcher.changed()` (`PRAGMA data_version`, microseconds) every
`interval` seconds and bumps a version number; each open stream waits on it and sends
`event: change`. The page then re-fetches its own URL (the view's fragment) — the database is
queried once per change per open page, never on a timer. `retry: 1000` makes the browser's
EventSource reconnect a second after the server restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import StreamingResponse

from ..db.watch import Watcher

HEARTBEAT_S = 15.0


class Hub:
    def __init__(self, db: Any, *, interval: float = 0.2) -> None:
        self.db = db  # the watcher comes from the database: PRAGMA data_version, or LISTEN on PostgreSQL
        self.interval = interval
        self.version = 0
        self._event: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._watcher: Watcher | None = None

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._event = asyncio.Event()
            self._watcher = self._watcher or self.db.watcher(interval=self.interval)
            self._task = loop.create_task(self._run())

    async def _run(self) -> None:
        assert self._watcher is not None
        while True:
            try:
                changed = self._watcher.changed()
            except Exception:  # noqa: BLE001 - a locked or replaced file: try again next poll
                changed = False
            if changed:
                self.version += 1
                event, self._event = self._event, asyncio.Event()
                assert event is not None
                event.set()
            await asyncio.sleep(self.interval)

    async def next_change(self, seen: int, timeout: float) -> int:
        """The version once it differs from `seen`, or `seen` after `timeout` seconds."""
        self._start()
        if self.version != seen:
            return self.version
        assert self._event is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout)
        return self.version

    async def stream(self, request: Request) -> StreamingResponse:
        async def events() -> AsyncIterator[str]:
            self._start()
            seen = self.version
            yield f"retry: 1000\nevent: hello\ndata: {seen}\n\n"
            while not await request.is_disconnected():
                now = await self.next_change(seen, HEARTBEAT_S)
                if now != seen:
                    seen = now
                    yield f"event: change\ndata: {now}\n\n"
                else:
                    yield ": keep-alive\n\n"

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None
