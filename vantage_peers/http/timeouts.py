"""Connections that never finish their request headers are closed (idle or slow-header clients).

uvicorn arms its keep-alive timer only after a response, and cancels it on any received byte: a
client that connects and sends nothing, or sends one header byte every few seconds, holds its
connection (and a file descriptor) forever. `guarded_protocol(seconds)` subclasses uvicorn's HTTP
protocol with one deadline: from the moment a connection opens (or a response completes) the next
request's headers must be complete within `seconds`, else the connection is closed. A request that
is being handled is never cut (the deadline only closes a connection that is waiting for headers).
"""

from __future__ import annotations

import asyncio
from typing import Any

DEFAULT_HEADER_TIMEOUT = 10.0


def _base_protocol() -> type[asyncio.Protocol]:
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    return AutoHTTPProtocol


def guarded_protocol(header_timeout: float = DEFAULT_HEADER_TIMEOUT) -> type[asyncio.Protocol]:
    base: Any = _base_protocol()

    class HeaderDeadlineProtocol(base):  # type: ignore[misc, valid-type]
        _vp_timer: asyncio.TimerHandle | None = None
        _vp_cycle: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._vp_arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.cycle is not self._vp_cycle:  # a new request's headers arrived
                self._vp_disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._vp_arm()  # the next request on this keep-alive connection has the same deadline

        def connection_lost(self, exc: Exception | None) -> None:
            self._vp_disarm()
            super().connection_lost(exc)

        def _vp_arm(self) -> None:
            self._vp_disarm()
            self._vp_cycle = self.cycle
            self._vp_timer = self.loop.call_later(header_timeout, self._vp_expire)

        def _vp_disarm(self) -> None:
            if self._vp_timer is not None:
                self._vp_timer.cancel()
                self._vp_timer = None

        def _vp_expire(self) -> None:
            self._vp_timer = None
            waiting = self.cycle is None or self.cycle.response_complete
            if waiting and self.cycle is self._vp_cycle and not self.transport.is_closing():
                self.transport.close()

    return HeaderDeadlineProtocol
