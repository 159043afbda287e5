"""This server process: its session, its heartbeat thread, and the notice of inherited leases (#30).

- `state_of(app)`: the process's session id (random at start) and identity (VP_ORCHESTRATOR /
  VP_INSTANCE_ID). Calls of a stdio process bind the session (leases.bind_session): the leases they
  are granted or renew by hand record it, and its presence renews only that session's leases.
- `Heartbeat`: a daemon thread per server process (also with VP_SCHEDULER=off), one short statement
  every VP_HEARTBEAT_SECONDS (default VP_TICK_SECONDS); a busy database is logged and retried at the
  next beat, never fatal; a clean stop marks the row `stoppedAt`.
- `first_answer`: on the process's first call as its identity, the leases that identity held in a
  gone process (docs/presence.md) are added to that answer: `inheritedLeases` (ids, kind, key, state)
  and a warning saying what to do. They are not adopted: see docs/presence.md for why.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from ...core import inline, sdk
from ...core.ids import new_id, now_ms
from ...core.parties import SYSTEM
from ..leases import store as leases
from . import processes

if TYPE_CHECKING:
    from ...pipeline.app import App

log = logging.getLogger("vantage_peers.heartbeat")
BEAT_BUSY_MS = 1_000  # a beat waits at most this long for the write lock, then tries at the next beat
CHECK_BUSY_MS = 500  # the inherited-leases check before a call: best effort, never the call's budget
RECHECK_SECONDS = 1.0  # while a lease of this identity is held by a process that may be alive


@dataclasses.dataclass
class ProcessState:
    me: processes.Me
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    checked: bool = False  # the first call as the identity was answered with what it inherits
    pending: bool = False  # another session of the identity holds leases and still looked live
    last_check: float = 0.0
    heartbeat: Heartbeat | None = None


def beat_seconds(settings: Any) -> float:
    value = settings.heartbeat_seconds
    return float(value) if value is not None and value > 0 else float(settings.tick_seconds)


def state_of(app: App) -> ProcessState:
    def make() -> ProcessState:
        s = app.settings
        me = processes.Me(session=new_id("ses"), orchestrator=s.orchestrator, instance=s.instance_id or "",
                          transport="stdio", beat_ms=max(1, int(beat_seconds(s) * 1000)), started_at=now_ms())
        return ProcessState(me)

    return app.extension("profiles.process", make)


# -- heartbeat ---------------------------------------------------------------------------------

class Heartbeat:
    """One daemon thread refreshing this process's row; `stop()` marks it stopped."""

    def __init__(self, app: App, state: ProcessState) -> None:
        self.app, self.state = app, state
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failures = 0

    def beat(self, *, prune: bool = False) -> bool:
        me, db = self.state.me, self.app.db

        def write(c: Any) -> None:
            now = now_ms()  # taken once the lock is held: liveUntil counts from the write
            if prune:
                processes.prune(c, now)
            processes.beat(c, me, now)

        try:
            with db.call_scope(busy_ms=BEAT_BUSY_MS):
                db.write(write)
        except Exception as exc:  # noqa: BLE001 - a locked or unreachable database never stops the server
            self.failures += 1
            if self.failures == 1 or self.failures % 20 == 0:
                log.warning("heartbeat of session %s skipped (%s: %s); retrying every %.3gs",
                            me.session, type(exc).__name__, exc, me.beat_ms / 1000)
            return False
        if self.failures:
            log.warning("heartbeat of session %s back after %d skipped beat(s)", me.session, self.failures)
            self.failures = 0
        return True

    def start(self) -> Heartbeat:
        self.state.heartbeat = self
        self.beat(prune=True)  # registered before the first request is read
        self._thread = threading.Thread(target=self._loop, name="vantage-peers-heartbeat", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        seconds = self.state.me.beat_ms / 1000
        last_prune = time.monotonic()
        while not self._stop.wait(seconds):
            prune = time.monotonic() - last_prune > 3600
            if self.beat(prune=prune) and prune:
                last_prune = time.monotonic()

    def stop(self, timeout: float = 5.0) -> None:
        """Clean shutdown: no more beats, and the row says the process stopped."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        try:
            with self.app.db.call_scope(busy_ms=2_000):
                self.app.db.write(lambda c: processes.stop(c, self.state.me.session, now_ms()))
        except Exception as exc:  # noqa: BLE001 - its row then goes stale on its own within the window
            log.warning("could not mark session %s stopped: %s", self.state.me.session, exc)


def start(app: App, transport: str = "stdio") -> Heartbeat:
    """Register this server process and start its heartbeat (cli: the stdio server)."""
    state = state_of(app)
    if state.me.transport != transport:
        state.me = dataclasses.replace(state.me, transport=transport)
    return Heartbeat(app, state).start()


# -- the first answer --------------------------------------------------------------------------

def advice(items: list[dict[str, Any]], who: str) -> str:
    held = [i for i in items if i["state"] == "held"]
    lost = [i for i in items if i["state"] != "held"]
    listed = "; ".join(f"{i['kind']} {i['key']} ({i['state']}, id {i['id']})" for i in items[:10])
    more = f" … and {len(items) - 10} more" if len(items) > 10 else ""
    text = (f"{who} held {len(items)} lease(s) in a server process that is gone (crashed, killed or "
            f"restarted): {listed}{more}. See inheritedLeases.")
    if held:
        text += (" Held ones are NOT renewed by this process and lapse at their expiresAt unless you act: to resume, "
                 "renew_task_claim(taskId) / renew_path_reservations(ids) / acquire_slot(name); to let go, "
                 "complete_task / pause_task / release_paths(ids) / release_slot(name).")
    if lost:
        text += (" Lapsed or taken ones are not yours any more: a lapsed task went back to todo (checkout_task "
                 "it again to resume); a taken one is held by someone else (takenBy).")
    return text


def check(app: App, state: ProcessState, who: str, *, for_notice: bool) -> list[dict[str, Any]]:
    """The leases `who` (this process's identity) inherits; with `for_notice`, marked as told."""
    me = state.me

    def run(c: Any, mark: bool) -> tuple[list[dict[str, Any]], bool]:
        items, pending = processes.inherited(c, me=me, orchestrator=who, instance=me.instance, now=now_ms(),
                                             for_notice=for_notice)
        if mark and items:
            first = set(processes.mark_noticed(c, session=me.session, items=items))
            items = [i for i in items if i["id"] in first]
        return items, pending

    items, pending = app.db.read(lambda c: run(c, False))  # the common case (nothing) takes no write lock
    if for_notice and items:
        items, pending = app.db.write(lambda c: run(c, True))
    if for_notice:
        state.pending = pending
    return items


def first_answer(app: App) -> Any:
    """The before-call hook: bind the session; on the first call as the identity, add what it inherits."""
    state = state_of(app)

    def hook(tool: str, kwargs: dict[str, Any]) -> None:
        if sdk.current_principal() is not None:
            return None  # over HTTP the agent is the token's identity, not this process
        leases.bind_session(state.me.session)
        who = app.settings.orchestrator
        if not who or who == SYSTEM:
            return None
        if state.checked and not (state.pending and time.monotonic() - state.last_check >= RECHECK_SECONDS):
            return None
        if not state.lock.acquire(blocking=not inline.active()):
            raise inline.WouldWait  # a quick call on the event loop never waits for another call's check
        try:
            if state.checked and not state.pending:
                return None
            state.last_check = time.monotonic()
            try:
                with app.db.call_scope(busy_ms=CHECK_BUSY_MS):
                    items = check(app, state, who, for_notice=True)
            except Exception as exc:  # noqa: BLE001 - tried again on the next call; the call goes on
                log.warning("inherited-lease check skipped: %s", exc)
                return None
            state.checked = True
        finally:
            state.lock.release()
        if items:
            label = who + (f"/{state.me.instance}" if state.me.instance else "")
            app.notice("inheritedLeases", items)
            app.warn(advice(items, label))
        return None

    return hook
