"""The registry: the App every domain registers its tools, records, jobs and hooks on.

It holds the settings, the database and (once composed by server.py) the MCP server. It decides
nothing about a call: the call pipeline (calls.py) applies the policies each tool declares here.

Extension points (the complete list; a domain plugs in through these and nothing else):
- `tool(kind, ..., identity=, owns=, master_only=, open=, shared=, idempotent=)` — a tool and its policy
- `add_record(kind, loader)` — who the parties of a record kind are (for `owns=` declarations)
- `before_call(fn)` — `fn(tool, kwargs)` before every body: may raise, or return replaced kwargs
- `on_result(tool, fn)` — `fn(CallToolResult)` after every successful call of one tool
- `on_server(fn)` — `fn(mcp)` once the MCPServer exists (resources, prompts)
- `add_route(route)` — an extra Starlette route served by `vantage-peers serve`
- `add_job(name, fn, every_seconds=|cron=, concurrent=)` — a scheduler job
- `add_corpus(corpus)` — an embedded table the embedding worker, reindex and doctor serve
- `on_task_done(fn)` — `fn(conn, task)` in the transaction that closes a task
- `on_presence(fn)` — `fn(conn, orchestrator, instance)`: a named process's calls refresh presence here
"""

from __future__ import annotations

import inspect
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations

from ..db import Database
from . import calls, policy, prebuilt
from .policy import Owns, RecordInfo
from .settings import Settings

F = TypeVar("F", bound=Callable[..., Any])

# Only the hints that differ from the MCP defaults (readOnlyHint=false, destructiveHint=true,
# idempotentHint=false, openWorldHint=true) go on the wire: a client applies the defaults, so it reads
# exactly what four explicit hints said, for ~42 fewer bytes a tool (docs/clients.md#tool-list-weight).
# destructiveHint=true stays explicit: the hint that warns is never left for a client to infer.
# destructive/idempotent mean nothing on a read-only tool (spec), so reads carry neither.
READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
WRITE = ToolAnnotations(destructiveHint=False, openWorldHint=False)
IDEMPOTENT_WRITE = ToolAnnotations(destructiveHint=False, idempotentHint=True, openWorldHint=False)
DESTRUCTIVE = ToolAnnotations(destructiveHint=True, openWorldHint=False)
SPEC_DEFAULTS = {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": False, "open_world_hint": True}

KINDS = {"read": READ_ONLY, "write": WRITE, "idempotent": IDEMPOTENT_WRITE, "destructive": DESTRUCTIVE}



def effective_hints(annotations: ToolAnnotations | None) -> ToolAnnotations:
    """The hints a client acts on: each absent one at its MCP default; on a read-only tool
    destructiveHint=false and idempotentHint=true (it changes nothing, so repeating it changes nothing)."""
    sent = annotations.model_dump(exclude_none=True) if annotations is not None else {}
    hints = {**SPEC_DEFAULTS, **{k: v for k, v in sent.items() if k in SPEC_DEFAULTS}}
    if hints["read_only_hint"]:
        hints.update(destructive_hint=False, idempotent_hint=True)
    return ToolAnnotations(**{k: v for k, v in sent.items() if k not in SPEC_DEFAULTS}, **hints)


PRESENCE_BUSY_MS = 250  # the presence write before a call waits at most this long for the lock


class App:
    def __init__(self, settings: Settings, db: Database) -> None:
        self.settings = settings
        self.db = db
        self.mcp: MCPServer | None = None  # set by server.create_app once every domain has registered
        self.tools: list[Tool] = []
        self.registered: dict[str, calls.Registered] = {}
        self.records: dict[str, policy.Loader] = {}
        self.jobs: list[tuple[str, Callable[[], Any]]] = []
        self.job_schedules: dict[str, dict[str, Any]] = {}  # name -> {every_seconds, cron}; absent = every tick
        self.scheduler: Any = None  # the Scheduler running this app's jobs, if any
        self.before_call_hooks: list[Callable[[str, dict[str, Any]], dict[str, Any] | None]] = []
        self.corpora: list[Any] = []  # embedded corpora (search.corpus.Corpus) the domains register
        self.routes: list[Any] = []
        self.server_hooks: list[Callable[[MCPServer], None]] = []
        self.result_hooks: dict[str, list[Callable[[Any], Any]]] = {}
        self.dense_text: set[str] = set()  # tools whose text block is compact JSON (core/compact.py)
        self.presence_hooks: list[Callable[[Any, str, str | None], Any]] = []
        # Toolsets (toolsets.py): the set of each tool, and the sets this session has enabled.
        self.toolset_of: dict[str, str] = {}
        self.enabled_toolsets: set[str] = set()
        # Where each tool was registered: (phase, sequence), so the listing order does not depend on
        # when a domain was loaded (deferred.py), and the domain that registered it (domain_tools.json).
        self.tool_order: dict[str, tuple[int, int]] = {}
        self.tool_domain: dict[str, str] = {}
        self.phase: tuple[int, str] = (0, "")  # (position, domain) being registered; set by server.create_app
        # Registration left for later (VP_TOOLSETS without the domain's sets, stdio only): deferred.py.
        self.deferred: Any = None
        self.added_at: dict[int, int] = {}  # id(job, corpus or hook) -> the phase that added it (deferred.py)
        self._presence_lock = threading.Lock()
        self._presence_at: dict[str, float] = {}
        # Per-App extension state: no module-level registry outlives an App.
        # extensions: domain state keyed "domain.name" (see extension()); task_done_hooks run inside
        # the completing transaction (on_task_done); concurrent_jobs skip the scheduler's lease.
        self.extensions: dict[str, Any] = {}
        self._extensions_lock = threading.Lock()
        self.task_done_hooks: list[Callable[[Any, dict[str, Any]], None]] = []
        self.concurrent_jobs: set[str] = set()

    # -- the current call -------------------------------------------------------------------------
    def actor(self) -> policy.Actor:
        """Who the current call acts as (resolved once by the pipeline)."""
        state = calls.current()
        return state.actor if state is not None else policy.Actor(identity=self.settings.orchestrator)

    def read_prefixes(self) -> tuple[str, ...] | None:
        """The namespaces the current call may read (None = all): passed to the stores' filters."""
        state = calls.current()
        return state.read_prefixes if state is not None else None

    def readers(self) -> tuple[str, ...] | None:
        """Whose messages and tasks the current call may read (policy.readers_of): None = every record."""
        state = calls.current()
        return state.readers if state is not None else None

    def warn(self, message: str) -> None:
        """Add a line to the current call's `warnings` (the call still succeeds)."""
        state = calls.current()
        if state is not None and message not in state.warnings:
            state.warnings.append(message)

    def notice(self, key: str, value: Any) -> None:
        """Add a structured field `key` to the current call's answer (beside `warnings`; the body's keys win)."""
        state = calls.current()
        if state is not None:
            state.notices[key] = value

    def tools_changed(self) -> None:
        """The tool list changed during this call: the client gets notifications/tools/list_changed."""
        state = calls.current()
        if state is not None:
            state.tools_changed = True

    def namespace_of(self, memory_id: str) -> str | None:
        """The namespace of a record the namespace rules look up (memories)."""
        load = self.records.get("memory")
        info = self.db.read(lambda c: load(c, memory_id)) if load else None
        return info.namespace if info else None

    def touch_presence(self, orch: str | None, inst: str | None) -> None:
        """Refresh `orch`'s `lastSeen` (throttled per orchestrator): this process's VP_ORCHESTRATOR on
        stdio, the identity a token carries over HTTP (policy.presence_of decides)."""
        if not orch or orch == policy.SYSTEM or not self.presence_hooks:
            return
        now = time.monotonic()
        with self._presence_lock:
            if now - self._presence_at.get(orch, float("-inf")) < self.settings.presence_interval_seconds:
                return
            if len(self._presence_at) > 10_000:  # a server that has seen many identities: start over
                self._presence_at.clear()
            self._presence_at[orch] = now

        def touch(conn: Any) -> None:
            for hook in self.presence_hooks:
                hook(conn, orch, inst)

        try:
            with self.db.call_scope(busy_ms=PRESENCE_BUSY_MS):  # best effort: never eat the call's lock budget
                self.db.write(touch)
        except Exception as exc:  # noqa: BLE001 - presence is best effort: it never fails the call it precedes
            print(f"vantage-peers: presence refresh skipped: {exc}", file=sys.stderr, flush=True)

    def _mark(self, item: Any) -> Any:
        self.added_at[id(item)] = self.phase[0]
        return item

    def in_registration_order(self) -> None:
        """Put jobs, corpora and hooks back in the order a full registration adds them (deferred.py)."""
        for items in (self.jobs, self.corpora, self.task_done_hooks, self.presence_hooks, self.before_call_hooks):
            items.sort(key=lambda item: self.added_at.get(id(item), 0))

    # -- extension points ---------------------------------------------------------------------------
    def add_record(self, kind: str, loader: Callable[[Any, str], RecordInfo | None]) -> None:
        self.records[kind] = loader

    def on_presence(self, fn: Callable[[Any, str, str | None], Any]) -> None:
        self.presence_hooks.append(self._mark(fn))

    def add_job(self, name: str, fn: Callable[[], Any], *, every_seconds: float | None = None,
                cron: str | None = None) -> None:
        """A background job: every tick by default, or at most every `every_seconds`, or on a UTC `cron`."""
        self.jobs.append(self._mark((name, fn)))
        if every_seconds is not None or cron is not None:
            self.job_schedules[name] = {"every_seconds": every_seconds, "cron": cron}

    def before_call(self, fn: Callable[[str, dict[str, Any]], dict[str, Any] | None]) -> None:
        self.before_call_hooks.append(self._mark(fn))

    def add_corpus(self, corpus: Any) -> None:
        """An embedded corpus (search.corpus.Corpus) served by the embedding worker, reindex and doctor."""
        self.corpora.append(self._mark(corpus))

    def add_route(self, route: Any) -> None:
        self.routes.append(route)

    def on_server(self, fn: Callable[[MCPServer], None]) -> None:
        self.server_hooks.append(fn)

    def on_result(self, tool_name: str, fn: Callable[[Any], Any]) -> None:
        self.result_hooks.setdefault(tool_name, []).append(fn)

    def wake(self, job: str) -> None:
        """Ask this process's scheduler (when it runs one) to run `job` now rather than at the next tick."""
        if self.scheduler is not None:
            self.scheduler.wake(job)

    def extension(self, key: str, factory: Callable[[], Any]) -> Any:
        """This App's object under `key` ("domain.name"), made by `factory()` on first use (thread-safe)."""
        with self._extensions_lock:
            if key not in self.extensions:
                self.extensions[key] = factory()
            return self.extensions[key]

    def on_task_done(self, fn: Callable[[Any, dict[str, Any]], None]) -> None:
        """Call `fn(conn, task)` when a task becomes done, inside the completing transaction."""
        if fn not in self.task_done_hooks:
            self.task_done_hooks.append(self._mark(fn))

    def task_done(self, conn: Any, task: dict[str, Any]) -> None:
        """Run this App's task-done hooks (the tasks domain passes this to its lifecycle functions)."""
        self.complete_registration()  # a deferred domain may hook task completion (github links issues)
        for fn in list(self.task_done_hooks):
            fn(conn, task)

    def complete_registration(self) -> None:
        """Register the domains left out at start (deferred.py); a no-op once every domain is in."""
        later = self.deferred
        if later is not None:
            later.load(self)

    def register_enabled(self) -> None:
        """Register the deferred domains that have a tool in an enabled set (deferred.py): before a
        request that may need their hooks, jobs or resources."""
        later = self.deferred  # read once: another thread may finish the registration meanwhile
        if later is not None:
            later.load(self, enabled_only=True)

    def allow_concurrent(self, job: str) -> None:
        """Let every process run the every-tick job `job` on each tick without the lease (scheduler.py)."""
        self.concurrent_jobs.add(job)

    # -- registration -----------------------------------------------------------------------
    def tool(self, kind: str, *, name: str | None = None, description: str | None = None,
             toolset: str | None = None, identity: str | None = None, identity_required: bool = True,
             subject: str | None = None,
             instance: str | None = None, others: tuple[str, ...] = (), owns: Owns | tuple[Owns, ...] | None = None,
             master_only: str | None = None, open: bool = False, shared: str | None = None,
             idempotent: bool = False, quick: bool = False) -> Callable[[F], F]:
        """Register a tool with its policy (see policy.py); its toolset defaults to its domain's.
        `quick`: the body only reads and writes the database (no model, network, subprocess or sleep),
        so on SQLite it runs on the event loop, without a worker-thread hop (onloop.py)."""
        annotations = KINDS[kind]

        def decorator(fn: F) -> F:
            sig = prebuilt.signature_of(fn)
            aliases = calls.aliases_of(sig)
            inverse = {param: alias for alias, param in aliases.items()}
            wire = {inverse.get(n, n) for n in sig.parameters}
            tool_name = name or fn.__name__
            rules = policy.declare(kind, wire, identity=identity, identity_required=identity_required, subject=subject,
                                   instance=instance, others=others, owns=owns, master_only=master_only,
                                   open=open, shared=shared, idempotent=idempotent, quick=quick)
            reg = calls.Registered(tool_name, fn, rules, aliases)
            doc = inspect.cleandoc(description) if description else inspect.getdoc(fn) or ""
            self.tools.append(calls.build_tool(self, reg, doc, annotations, sig))
            self.registered[tool_name] = reg
            from .toolsets import toolset_for_module

            self.toolset_of[tool_name] = toolset or toolset_for_module(fn.__module__)
            self.tool_order[tool_name] = (self.phase[0], len(self.tool_order))
            self.tool_domain[tool_name] = self.phase[1]
            return fn

        return decorator
