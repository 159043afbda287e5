"""Server push over streamable HTTP (#31): `GET /mcp` with `Accept: text/event-stream`.

`serve` answers POSTs statelessly (any worker, any replica), so the push stream is stateless too:
what a stream carries is decided by the token alone, and what it has told its client is written
into each event id, computed from the database. A dropped client (or one whose replica died)
reconnects to any replica with `Last-Event-ID` and is told at once about every resource that
changed since that id.

Two kinds of stream, by query string:
- default: JSON-RPC `notifications/resources/updated` for `vp://inbox/<who>` and `vp://tasks/<who>`
  (the tasks resource lists claimable work too) — what a stdio subscriber of both receives. The
  event id is `v1.<inbox>.<tasks>`, 16 hex of a hash of each resource's content as last notified;
  the first frame primes the client with an id and no data (MCP 2025-11-25, "resumability").
- `?pending=messages,tasks,work`: `notifications/vantage-peers/pending` with the pending items
  `vantage-peers wait` decides on (wake.py), on connect and whenever their keys change: what
  `wait --url` (push_client.py) reads.

`who` is the token's one identity, or `?orchestrator=` (which the token must be allowed to read,
policy.readers_of: a token never hears another identity's inbox); `?instance=` narrows `pending`.

One `PushHub` per process: a thread on `db.watcher` (SQLite data_version; PostgreSQL LISTEN, so a
commit on any replica wakes every replica's streams) re-reads each watched resource once per
commit and hands events to the streams' event loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from ..core import sdk
from ..core.errors import InvalidArgument
from ..core.validators import check_name
from ..domains.messaging import inbox
from ..domains.messaging.tools_resources import render
from ..domains.tasks import queue as _work  # noqa: F401  # registers the "work" kind (claimable tasks)
from ..pipeline import policy

log = logging.getLogger(__name__)
PING_SECONDS = 15.0  # an SSE comment this often: proxies keep the stream, clients notice a dead one
LOOK_SECONDS = 0.25  # how soon a new stream gets its first look (a commit wakes the hub at once)
RETRY_SECONDS = 1.0  # after the database went away (PostgreSQL restarted), open the watcher again
RECONNECT_MS = 1000  # the SSE `retry:` a client waits before reconnecting
TEXT_CHARS = 200  # item texts in pending events (the digest shows 100)
UPDATED = "notifications/resources/updated"
PENDING = "notifications/vantage-peers/pending"


def _fp(text: str | None) -> str:
    return hashlib.sha256((text or "").encode()).hexdigest()[:16]


def event_id(last: dict[str, str], uris: tuple[str, ...]) -> str:
    return "v1." + ".".join(last[u] for u in uris)


def parse_event_id(text: str | None, uris: tuple[str, ...]) -> dict[str, str] | None:
    """What a `Last-Event-ID` says the client was told; None when absent. An id we cannot read
    counts as "told nothing": every resource is announced once, so nothing is missed."""
    if text is None:
        return None
    parts = text.strip().split(".")
    if len(parts) != len(uris) + 1 or parts[0] != "v1":
        return {u: "" for u in uris}
    return dict(zip(uris, parts[1:], strict=True))


@dataclass(eq=False)
class Listener:
    """One open stream: whose resources, and what its client has been told so far."""

    who: str
    instance: str | None
    kinds: tuple[str, ...] | None  # None: resource notifications; else pending items of these kinds
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)
    last: dict[str, str] | None = None  # resource mode: uri -> content hash the client was told
    keys: frozenset[str] | None = None  # pending mode: the keys last sent
    fresh: bool = True  # not looked at by the hub yet

    @property
    def uris(self) -> tuple[str, ...]:
        return (f"vp://inbox/{self.who}", f"vp://tasks/{self.who}")

    def put(self, frame: bytes | None) -> bool:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, frame)
            return True
        except RuntimeError:  # its event loop has ended
            return False


def _frame(ident: str, message: dict[str, Any] | None) -> bytes:
    if message is None:  # the priming event also tells SSE clients to reconnect after a second
        return f"id: {ident}\nretry: {RECONNECT_MS}\ndata: \n\n".encode()
    data = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    return f"id: {ident}\ndata: {data}\n\n".encode()


HUBS: weakref.WeakSet[PushHub] = weakref.WeakSet()


def end_streams() -> None:
    """serve is stopping: end this process's push streams at once (their clients reconnect to
    another replica) rather than hold the graceful shutdown for its whole grace period."""
    for hub in list(HUBS):
        hub.close()


class PushHub:
    """The streams of this process and the one watcher thread that feeds them."""

    def __init__(self, app: Any) -> None:
        HUBS.add(self)
        self.app = app
        self.listeners: set[Listener] = set()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.closed = False

    def open(self, listener: Listener) -> None:
        with self.lock:
            if self.closed:
                listener.put(None)
                return
            self.listeners.add(listener)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="vantage-peers-push", daemon=True)
                self.thread.start()

    def drop(self, listener: Listener) -> None:
        with self.lock:
            self.listeners.discard(listener)

    def close(self) -> None:
        """End every stream (serve is stopping: clients reconnect to another replica)."""
        with self.lock:
            self.closed = True
            listeners = list(self.listeners)
        for listener in listeners:
            listener.put(None)

    def _idle(self) -> bool:
        with self.lock:
            if not self.listeners:
                self.thread = None  # a new stream starts a new thread
                return True
            return False

    def _run(self) -> None:
        while True:
            try:
                with self.app.db.watcher(interval=0.2) as watcher:  # listening before anything is read
                    due = self._look(everyone=True)  # (re)opened: anything may have changed meanwhile
                    while not self._idle():
                        changed = watcher.wait(LOOK_SECONDS)
                        if changed or (due is not None and time.time() * 1000 >= due):
                            due = self._look(everyone=True)
                        else:
                            self._look(everyone=False)
                    return
            except Exception:  # noqa: BLE001 - the database went away: streams stay open, look again later
                log.warning("push: the change watcher failed; retrying", exc_info=True)
                if self._idle():
                    return
                time.sleep(RETRY_SECONDS)

    def _look(self, *, everyone: bool) -> int | None:
        """Tell each stream (or only the new ones) what changed; when the next uncommitted change is due."""
        with self.lock:
            chosen = [li for li in self.listeners if everyone or li.fresh]
        cache: dict[Any, Any] = {}
        due: list[int] = []
        for listener in chosen:
            try:
                frames = self._frames(listener, cache, due)
            except Exception:  # noqa: BLE001 - e.g. BUSY, a lost connection: the next look retries
                log.warning("push: reading for %s failed", listener.who, exc_info=True)
                continue
            listener.fresh = False
            for frame in frames:
                if not listener.put(frame):
                    self.drop(listener)
                    break
        return min(due) if due else None

    def _frames(self, li: Listener, cache: dict[Any, Any], due: list[int]) -> list[bytes]:
        if li.kinds is not None:
            return self._pending_frames(li, cache, due)
        uris = li.uris
        now = {u: cache[u] if u in cache else cache.setdefault(u, _fp(render(self.app, u))) for u in uris}
        frames = []
        if li.last is None:  # a new stream without Last-Event-ID: from now on
            li.last = dict(now)
        if li.fresh:  # the priming event: an id to resume from, before anything else
            frames.append(_frame(event_id(li.last, uris), None))
        for uri in uris:
            if li.last.get(uri) != now[uri]:
                li.last[uri] = now[uri]
                frames.append(_frame(event_id(li.last, uris), {"jsonrpc": "2.0", "method": UPDATED,
                                                               "params": {"uri": uri}}))
        return frames

    def _pending_frames(self, li: Listener, cache: dict[Any, Any], due: list[int]) -> list[bytes]:
        assert li.kinds is not None
        key = (li.who, li.instance, li.kinds)
        if key not in cache:
            for kind in li.kinds:  # e.g. lapsed claims expired, as local `wait` does before reading
                refresh = inbox.REGISTRY[kind].refresh
                if refresh is not None and (when := refresh(self.app.db)) is not None:
                    due.append(when)
            cache[key] = inbox.pending(self.app.db, who=li.who, instance=li.instance, kinds=li.kinds)
        items = cache[key]
        keys = frozenset(i["key"] for i in items)
        if not li.fresh and keys == li.keys:
            return []
        li.keys = keys
        shown = [{**i, "text": str(i["text"] or "")[:TEXT_CHARS]} for i in items]
        params = {"orchestrator": li.who, "instanceId": li.instance, "items": shown}
        return [_frame("p1." + _fp("\n".join(sorted(keys))), {"jsonrpc": "2.0", "method": PENDING,
                                                               "params": params})]


# --- the endpoint -----------------------------------------------------------------------------------

class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def stream_params(request: Request, principal: Any) -> tuple[str, str | None, tuple[str, ...] | None]:
    """(who, instance, kinds) of a push request; Refused when the token may not hear `who`."""
    q = request.query_params
    try:
        named = check_name(q["orchestrator"], "orchestrator") if "orchestrator" in q else None
        instance = check_name(q["instance"], "instance") if "instance" in q else None
    except InvalidArgument as exc:
        raise Refused(400, f"INVALID_ARGUMENT: {exc.detail}") from None
    kinds = None
    if "pending" in q:
        kinds = tuple(dict.fromkeys(k.strip() for k in q["pending"].split(",") if k.strip()))
        if not kinds or set(kinds) - set(inbox.KINDS):
            raise Refused(400, f"INVALID_ARGUMENT: pending takes a comma list of {', '.join(inbox.KINDS)}")
    readers = policy.readers_of(principal)
    if named is not None:
        denial = policy.personal_denial(principal, f"vp://inbox/{named}")
        if denial:
            raise Refused(403, denial)
        return named, instance, kinds
    if readers is not None and len(readers) == 1:
        return readers[0], instance, kinds
    # 405 is the transport's "no stream offered here": clients (the Inspector, Claude Code) that open the
    # GET stream after initialize carry on over POST; a 400 makes some of them drop the session
    if readers:
        raise Refused(405, f"INVALID_ARGUMENT: this token may act as {list(readers)}: pass ?orchestrator=")
    raise Refused(405, "INVALID_ARGUMENT: pass ?orchestrator=<name>: this credential names no single identity")


def wants_stream(scope: Scope) -> bool:
    if scope["type"] != "http" or scope["method"] != "GET":
        return False
    accept = dict(scope.get("headers") or []).get(b"accept", b"")
    return b"text/event-stream" in accept


class PushEndpoint:
    """`/mcp`: a GET that accepts an event stream is a push stream, everything else goes to the SDK."""

    def __init__(self, endpoint: ASGIApp, hub: PushHub) -> None:
        self.endpoint, self.hub = endpoint, hub

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not wants_stream(scope):
            await self.endpoint(scope, receive, send)
            return
        request = Request(scope)
        principal = sdk.current_principal()
        try:
            who, instance, kinds = stream_params(request, principal)
        except Refused as exc:
            body = json.dumps({"error": exc.message}).encode()
            headers = [(b"content-type", b"application/json")]
            if exc.status == 405:
                headers.append((b"allow", b"POST, DELETE"))
            await send({"type": "http.response.start", "status": exc.status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        listener = Listener(who, instance, kinds, asyncio.get_running_loop())
        if kinds is None:
            listener.last = parse_event_id(request.headers.get("last-event-id"), listener.uris)
        expires = getattr(principal, "expires_at", None)  # seconds; the stream ends with its token
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store"),
                                (b"x-accel-buffering", b"no")]})
        self.hub.open(listener)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_until_disconnect, receive, tg.cancel_scope)
                await _pump(listener, send, expires)
                tg.cancel_scope.cancel()
            with contextlib.suppress(OSError, RuntimeError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self.hub.drop(listener)


async def _until_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


async def _pump(listener: Listener, send: Send, expires: int | None) -> None:
    while expires is None or time.time() < expires:
        wait = PING_SECONDS if expires is None else max(0.1, min(PING_SECONDS, expires - time.time()))
        try:
            with anyio.fail_after(wait):
                frame = await listener.queue.get()
        except TimeoutError:
            frame = b": ping\n\n"
        if frame is None:  # the hub is closing
            return
        await send({"type": "http.response.body", "body": frame, "more_body": True})
