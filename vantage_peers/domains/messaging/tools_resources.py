"""MCP resources `vp://inbox/{orchestrator}` and `vp://tasks/{orchestrator}`, with change notifications.

Clients that act on notifications subscribe: `resources/subscribe` (handshake-era protocol, answered
with `notifications/resources/updated` on that session) or `subscriptions/listen` with
`resourceSubscriptions` (2026-07-28, published on the SDK's subscription bus). One thread per
server watches the database file (`db.watch.Watcher`: `PRAGMA data_version`, a few Hz, near-zero
CPU) while anything is subscribed; on a commit by any process it re-reads only the subscribed
resources and notifies those whose content changed. A commit to something else notifies nobody.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPError

from ...core import sdk
from ...core.validators import check_name
from ...pipeline import policy
from ...pipeline.app import App
from . import inbox

log = logging.getLogger(__name__)
URI = re.compile(r"^vp://(inbox|tasks)/([^/?#]+)$")
MAX_CONTENT_CHARS = 500
POLL_SECONDS = 0.2


def render(app: App, uri: str) -> str | None:
    """The resource's JSON text, or None for a URI that is not one of ours."""
    m = URI.match(uri)
    if not m:
        return None
    kind, who = m.group(1), check_name(m.group(2), "orchestrator")
    if kind == "inbox":
        items = inbox.pending(app.db, who=who, instance=None, kinds=("messages",))
        unread = [{"receiptId": i["receiptId"], "messageId": i["messageId"], "from": i["from"],
                   "content": str(i["text"] or "")[:MAX_CONTENT_CHARS], "ackRequired": i["ackRequired"],
                   "deliveryAttempt": i["deliveryAttempt"]} for i in items]
        doc: dict[str, Any] = {"orchestrator": who, "unread": unread, "count": len(unread),
                               "note": "content cut to 500 characters; check_messages returns it whole"}
    else:
        tasks = inbox.task_queue(app.db, who=who)
        doc = {"orchestrator": who, "tasks": tasks, "count": len(tasks)}
        work = app.extensions.get("tasks.claimable")  # the tasks domain's eligibility rule (#30)
        if work is not None:  # todo tasks this orchestrator may claim: a new one notifies subscribers
            doc["claimable"] = [{k: i[k] for k in ("taskId", "text", "priority", "pool", "lapsed")}
                                for i in work(who)]
    return json.dumps(doc, ensure_ascii=False, sort_keys=True)


class Notifier:
    """Who is subscribed to what, and the watcher thread that tells them about changes."""

    def __init__(self, app: App, mcp: MCPServer) -> None:
        self.app, self.mcp = app, mcp
        # uri -> {connection: (session, event-loop token)}: keyed by the client's connection, since the
        # SDK makes a new ServerSession for every request (an unsubscribe's is not its subscribe's).
        self.legacy: dict[str, dict[Any, tuple[Any, Any]]] = {}
        self.listening: dict[str, dict[Any, int]] = {}  # uri -> {event-loop token: open listen streams}
        self.last: dict[str, str] = {}
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def _fingerprint(self, uri: str) -> str:
        return hashlib.sha256((render(self.app, uri) or "").encode()).hexdigest()

    def _ensure_thread(self) -> None:
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="vantage-peers-resource-watch", daemon=True)
                self.thread.start()

    def add(self, uri: str, session: Any | None) -> None:
        token = anyio.lowlevel.current_token()
        fp = self._fingerprint(uri)  # the baseline: a change after this moment is reported
        with self.lock:
            self.last.setdefault(uri, fp)
            if session is None:
                counts = self.listening.setdefault(uri, {})
                counts[token] = counts.get(token, 0) + 1
            else:
                self.legacy.setdefault(uri, {})[_connection(session)] = (session, token)
        self._ensure_thread()

    def remove(self, uri: str, session: Any | None, token: Any = None) -> None:
        with self.lock:
            if session is None:
                counts = self.listening.get(uri, {})
                if token in counts:
                    counts[token] -= 1
                    if counts[token] <= 0:
                        del counts[token]
            else:
                self.legacy.get(uri, {}).pop(_connection(session), None)
            for table in (self.legacy, self.listening):
                if uri in table and not table[uri]:
                    del table[uri]
            if uri not in self.legacy and uri not in self.listening:
                self.last.pop(uri, None)

    def _subscribed(self) -> list[str]:
        with self.lock:
            return sorted(set(self.legacy) | set(self.listening))

    def _run(self) -> None:
        with self.app.db.watcher(interval=POLL_SECONDS) as watcher:
            while True:
                uris = self._subscribed()
                if not uris:
                    with self.lock:  # nothing subscribed: stop (a new subscription starts a new thread)
                        if not (set(self.legacy) | set(self.listening)):
                            self.thread = None
                            return
                if not watcher.wait(1.0):
                    continue
                for uri in uris:
                    try:
                        fp = self._fingerprint(uri)
                    except Exception:  # noqa: BLE001 - e.g. BUSY: the next commit retries it
                        log.exception("reading %s for its subscribers failed", uri)
                        continue
                    with self.lock:
                        if self.last.get(uri) == fp:
                            continue
                        self.last[uri] = fp
                        sessions = list(self.legacy.get(uri, {}).values())
                        tokens = list(self.listening.get(uri, {}))
                    self._notify(uri, sessions, tokens)

    def _notify(self, uri: str, sessions: list[tuple[Any, Any]], tokens: list[Any]) -> None:
        for session, token in sessions:
            try:
                anyio.from_thread.run(session.send_resource_updated, uri, token=token)
            except Exception:  # noqa: BLE001 - the session is gone: forget it
                self.remove(uri, session)
        for token in tokens:
            try:
                anyio.from_thread.run(sdk.publish_subscription_event, self.mcp, ResourceUpdated(uri=uri), token=token)
            except Exception:  # noqa: BLE001 - that event loop has ended
                with self.lock:
                    self.listening.get(uri, {}).pop(token, None)


def _connection(session: Any) -> Any:
    """The client connection a request's ServerSession speaks for (the session itself if it has none)."""
    return getattr(session, "_connection", None) or session


def register(app: App) -> None:
    app.on_server(lambda mcp: install(app, mcp))


def install(app: App, mcp: MCPServer) -> None:
    @mcp.resource("vp://inbox/{orchestrator}", name="inbox", mime_type="application/json",
                  description="Unread (and redelivered) messages of one orchestrator; subscribe for updates.")
    def inbox_resource(orchestrator: str) -> str:
        return render(app, f"vp://inbox/{orchestrator}") or "{}"

    @mcp.resource("vp://tasks/{orchestrator}", name="task-queue", mime_type="application/json",
                  description="Open tasks assigned to one orchestrator; subscribe for updates.")
    def tasks_resource(orchestrator: str) -> str:
        return render(app, f"vp://tasks/{orchestrator}") or "{}"

    notifier = Notifier(app, mcp)
    mcp.vp_resource_notifier = notifier  # type: ignore[attr-defined]  # for tests and status
    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        denial = policy.personal_denial(sdk.current_principal(), uri)
        if denial:  # never hear another identity's inbox (#32)
            raise MCPError(code=types.INVALID_PARAMS, message=denial)
        if URI.match(uri):
            notifier.add(uri, ctx.session)
        return types.EmptyResult()

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        notifier.remove(str(params.uri), ctx.session)
        return types.EmptyResult()

    sdk.add_request_handler(mcp, "resources/subscribe", types.SubscribeRequestParams, subscribe)
    sdk.add_request_handler(mcp, "resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)

    listen_entry = sdk.request_handler(mcp, "subscriptions/listen")
    if listen_entry is None:
        return
    original = listen_entry.handler

    async def listen(ctx: Any, params: types.SubscriptionsListenRequestParams) -> Any:
        principal = sdk.current_principal()
        uris = [u for u in (params.notifications.resource_subscriptions or [])
                if URI.match(str(u)) and not policy.personal_denial(principal, str(u))]
        token = anyio.lowlevel.current_token()
        asked = params.notifications.resource_subscriptions or []
        if len(uris) != len(asked):  # the SDK's stream filters the shared bus by what it acknowledged: drop
            # another identity's URIs from the request itself, or it would hear their updates (#31)
            kept = [u for u in asked if not policy.personal_denial(principal, str(u))]
            params = params.model_copy(update={"notifications": params.notifications.model_copy(
                update={"resource_subscriptions": kept or None})})
        for uri in uris:
            notifier.add(str(uri), None)
        try:
            return await original(ctx, params)
        finally:
            for uri in uris:
                notifier.remove(str(uri), None, token)

    sdk.add_request_handler(mcp, "subscriptions/listen", types.SubscriptionsListenRequestParams, listen)
