"""Ports: a function a higher domain offers to the domains below it, declared here, the lowest
module of `domains/` (docs/internals.md, "Domain order and seams").

A port is declared once with its signature and meaning; its owner offers the implementation when
its module loads (`notify.offer(send_message)` in messaging/store.py), and a lower domain calls the
port (`ports.notify(conn, ...)`) without importing the owner. The server composes every domain,
so a port nothing offers is a wiring error: it raises rather than dropping the call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar

from ..db import Connection, Row

P = ParamSpec("P")
R = TypeVar("R")


class Port(Generic[P, R]):
    """A declared function whose body another domain offers (one implementation per port)."""

    def __init__(self, declared: Callable[P, R], owner: str) -> None:
        functools.update_wrapper(self, declared)
        self.owner = owner
        self.implementation: Callable[P, R] | None = None

    def offer(self, fn: Callable[P, R]) -> Callable[P, R]:
        self.implementation = fn
        return fn

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if self.implementation is None:
            raise RuntimeError(f"port {self.__name__}: nothing offers it; {self.owner} offers it when imported")
        return self.implementation(*args, **kwargs)


def port(owner: str) -> Callable[[Callable[P, R]], Port[P, R]]:
    """Declare a port: the decorated function gives its signature and docstring, never runs."""
    return lambda declared: Port(declared, owner)


@port("vantage_peers.domains.messaging.store")
def notify(conn: Connection, *, sender: str, channel: str, content: str, instance_id: str | None = None,
           data: dict[str, Any] | None = None) -> dict[str, Any]:
    """Send `content` from `sender` to `channel` (an orchestrator's inbox, or a channel) in `conn`'s
    transaction, as send_message does; `instance_id` narrows it to one instance. Leases tell a
    holder its reservation was force-released through this."""


@port("vantage_peers.domains.tasks.store")
def task_doc(row: Row) -> dict[str, Any]:
    """A task row as the tools return it (get_task's shape). get_mission lists its tasks with this."""
