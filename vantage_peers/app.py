"""The application object every domain registers its tools on.

`App` holds the settings, the database and the MCP server, and wraps each tool function so that
(1) wire names that are Python keywords (`from`) reach the right parameter, (2) the caller's
presence is refreshed when the process runs as a named orchestrator, and (3) only `CODE: message`
errors reach the agent. `_Tool` (below) is the one place every call passes through: strict
argument names, visible text content, `warnings`, and the tools/list_changed notification.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import inspect
import json
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Annotated, Any, TypeVar, get_args, get_origin

import apsw
import pydantic
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic.fields import FieldInfo

from . import arguments as argcheck
from . import limits
from .db import BUSY_ERRORS, Database
from .errors import Busy, InternalError, InvalidArgument, VantageError
from .settings import Settings

F = TypeVar("F", bound=Callable[..., Any])

READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False)
IDEMPOTENT_WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False)
DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=False)

KINDS = {"read": READ_ONLY, "write": WRITE, "idempotent": IDEMPOTENT_WRITE, "destructive": DESTRUCTIVE}

MAX_NAME_LENGTH = 200
PRESENCE_BUSY_MS = 250  # the presence write before a call waits at most this long for the lock
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # SQLite's integer range


def _aliases(sig: inspect.Signature) -> dict[str, str]:
    """Wire alias -> Python parameter name, for parameters declared `Annotated[..., Field(alias=...)]`."""
    out = {}
    for name, param in sig.parameters.items():
        ann = param.annotation
        if get_origin(ann) is Annotated:
            for meta in get_args(ann)[1:]:
                if isinstance(meta, FieldInfo) and meta.alias:
                    out[meta.alias] = name
    return out


def _validation_message(err: pydantic.ValidationError) -> str:
    parts = []
    for e in err.errors()[:5]:
        loc = ".".join(str(p) for p in e.get("loc", ())) or "value"
        if e.get("type") == "missing":
            parts.append(f"{loc}: required argument is missing")
        else:
            parts.append(f"{loc}: {e.get('msg')}")
    return "; ".join(parts)


@dataclasses.dataclass
class _CallState:
    """What a tool body reports besides its return value (see App.warn, App.tools_changed)."""

    warnings: list[str] = dataclasses.field(default_factory=list)
    tools_changed: bool = False


# Set by _Tool.run around each call; the tool body runs in a worker thread that sees a copy of
# this context, so it appends to the same _CallState object.
_CALL: contextvars.ContextVar[_CallState | None] = contextvars.ContextVar("vp_call", default=None)


class App:
    def __init__(self, settings: Settings, db: Database) -> None:
        self.settings = settings
        self.db = db
        self.mcp: MCPServer | None = None  # set by server.create_app once every domain has registered
        self.tools: list[Tool] = []
        self.tool_names: list[str] = []
        # Background jobs run by the scheduler thread: (name, fn) pairs, see scheduler.py.
        self.jobs: list[tuple[str, Callable[[], Any]]] = []
        self.job_schedules: dict[str, dict[str, Any]] = {}  # name -> {every_seconds, cron}; absent = every tick
        self.scheduler: Any = None  # the Scheduler running this app's jobs, if any
        # #20: embedded corpora (search.corpus.Corpus) registered by domains; search/ knows no domain.
        self.corpora: list[Any] = []
        # Cross-cutting extension points (see DESIGN.md "Cross-cutting policy lives in one layer"):
        # guards see every tool call before it runs, routes are extra HTTP endpoints for `serve`,
        # server hooks add resources/prompts once the MCPServer exists.
        self.guards: list[Callable[[str, dict[str, Any]], dict[str, Any] | None]] = []
        self.routes: list[Any] = []
        self.server_hooks: list[Callable[[MCPServer], None]] = []
        # Result hooks post-process one tool's converted result (CallToolResult), e.g. UI stream markers.
        self.result_hooks: dict[str, list[Callable[[Any], Any]]] = {}
        # Toolsets (toolsets.py): the set of each tool, and the sets this session has enabled.
        self.toolset_of: dict[str, str] = {}
        self.enabled_toolsets: set[str] = set()
        self._presence_lock = threading.Lock()
        self._presence_at = 0.0

    # -- identity ---------------------------------------------------------------------------
    def caller(self, value: str | None, field: str, *, required: bool = True) -> str | None:
        """The explicit identity argument, else VP_ORCHESTRATOR, else (if required) an error."""
        if value is None or value == "":
            value = self.settings.orchestrator
        if value is None:
            if required:
                raise InvalidArgument(
                    f"{field} is required (or start the server with VP_ORCHESTRATOR set to your orchestrator id)"
                )
            return None
        return check_name(value, field)

    def instance(self, value: str | None, who: str | None = None, field: str = "instanceId") -> str | None:
        """The explicit instance id, else VP_INSTANCE_ID, but only for VP_ORCHESTRATOR itself.

        `who` is the orchestrator the instance belongs to: this server's instance is never lent to
        another orchestrator acted for explicitly (it would register a foreign instance id).
        """
        if value is None or value == "":
            if who is not None and who != self.settings.orchestrator:
                return None
            return self.settings.instance_id
        return check_name(value, field)

    def touch_presence(self) -> None:
        """Refresh this process's orchestrator instance `lastSeen` (throttled)."""
        orch = self.settings.orchestrator
        if not orch:
            return
        now = time.monotonic()
        with self._presence_lock:
            if now - self._presence_at < self.settings.presence_interval_seconds:
                return
            self._presence_at = now
        from .domains.profiles import store as profiles

        try:
            with self.db.call_scope(busy_ms=PRESENCE_BUSY_MS):  # best effort: never eat the call's lock budget
                self.db.write(lambda c: profiles.touch(c, orchestrator_id=orch, instance_id=self.settings.instance_id))
        except Exception as exc:  # noqa: BLE001 - presence is best effort: it never fails the call it precedes
            print(f"vantage-peers: presence refresh skipped: {exc}", file=sys.stderr, flush=True)

    def add_job(self, name: str, fn: Callable[[], Any], *, every_seconds: float | None = None,
                cron: str | None = None) -> None:
        """A background job: every tick by default, or at most every `every_seconds`, or on a UTC `cron`."""
        self.jobs.append((name, fn))
        if every_seconds is not None or cron is not None:
            self.job_schedules[name] = {"every_seconds": every_seconds, "cron": cron}

    def add_corpus(self, corpus: Any) -> None:
        """#20: an embedded corpus (search.corpus.Corpus) served by the embedding worker, reindex and doctor."""
        self.corpora.append(corpus)

    def add_guard(self, fn: Callable[[str, dict[str, Any]], dict[str, Any] | None]) -> None:
        """Run `fn(tool_name, kwargs)` before every tool call; it may raise, or return replaced kwargs."""
        self.guards.append(fn)

    def add_route(self, route: Any) -> None:
        """An extra Starlette route served by `vantage-peers serve` (webhooks, admin endpoints)."""
        self.routes.append(route)

    def on_server(self, fn: Callable[[MCPServer], None]) -> None:
        """Call `fn(mcp)` once the MCPServer is built (register resources and prompts there)."""
        self.server_hooks.append(fn)

    def add_result_hook(self, tool_name: str, fn: Callable[[Any], Any]) -> None:
        """Apply `fn(CallToolResult) -> CallToolResult` to every successful result of `tool_name`."""
        self.result_hooks.setdefault(tool_name, []).append(fn)

    def warn(self, message: str) -> None:
        """Add a line to the current call's `warnings` (the call still succeeds)."""
        state = _CALL.get()
        if state is not None and message not in state.warnings:
            state.warnings.append(message)

    def tools_changed(self) -> None:
        """The tool list changed during this call: the client gets notifications/tools/list_changed."""
        state = _CALL.get()
        if state is not None:
            state.tools_changed = True

    def wake(self, job: str) -> None:
        """Ask this process's scheduler (when it runs one) to run `job` now rather than at the next tick."""
        if self.scheduler is not None:
            self.scheduler.wake(job)

    # -- registration -----------------------------------------------------------------------
    def tool(self, kind: str, *, name: str | None = None, description: str | None = None,
             toolset: str | None = None) -> Callable[[F], F]:
        """Register a tool; its toolset defaults to its domain's (toolsets.DOMAIN_TOOLSETS)."""
        annotations = KINDS[kind]

        def decorator(fn: F) -> F:
            sig = inspect.signature(fn, eval_str=True)
            aliases = _aliases(sig)
            wire_names = {param: alias for alias, param in aliases.items()}
            app = self

            @functools.wraps(fn)
            def wrapper(**kwargs: Any) -> Any:
                kwargs = {aliases.get(k, k): v for k, v in kwargs.items()}
                for key, value in kwargs.items():
                    if (isinstance(value, int) and not isinstance(value, bool) and key != "limit"  # limits clamp
                            and not INT64_MIN <= value <= INT64_MAX):
                        raise InvalidArgument(f"{wire_names.get(key, key)} is out of range: integers must fit "
                                              "in 64 bits (timestamps are Unix ms)")
                if limits.depth_exceeds(kwargs, limits.MAX_DEPTH + 1):  # kwargs itself is one level
                    raise InvalidArgument(limits.depth_message())
                try:
                    for guard in app.guards:
                        kwargs = guard(tool_name, kwargs) or kwargs
                    app.touch_presence()
                    with app.db.call_scope() as scope:  # one lock-wait budget and search budget per call
                        result = fn(**kwargs)
                        if scope.truncated and isinstance(result, dict):
                            result["truncated"] = True  # a search stopped at its time budget (search/budget.py)
                        return result
                except VantageError:
                    raise
                except BUSY_ERRORS:
                    # A lock met outside db.read/db.write's retries (which raise Busy themselves).
                    raise Busy(f"the database is locked by another process (waited up to "
                               f"{app.settings.busy_timeout_ms} ms, VP_BUSY_TIMEOUT_MS); retry shortly") from None
                except apsw.InterruptError:
                    raise Busy("the query was interrupted; retry shortly") from None
                except pydantic.ValidationError as err:
                    raise InvalidArgument(_validation_message(err)) from None
                except OverflowError:
                    # A nested integer beyond SQLite's 64-bit range (top-level ones are named above).
                    raise InvalidArgument("an integer argument is out of range: integers must fit in 64 bits") from None
                except UnicodeEncodeError:
                    # JSON allows an unpaired UTF-16 surrogate ("\\ud800") that UTF-8 (and SQLite) cannot store.
                    raise InvalidArgument("a text argument holds an unpaired surrogate (invalid Unicode); "
                                          "send valid UTF-8 text") from None
                except RecursionError:
                    raise InvalidArgument(limits.depth_message()) from None
                except Exception as exc:
                    # Never a bare "Error executing tool X": the agent gets a code, stderr the traceback.
                    traceback.print_exc(file=sys.stderr)
                    raise InternalError(f"{tool_name} failed unexpectedly ({type(exc).__name__}); "
                                        "retry, and report it if it persists") from exc

            wrapper.__signature__ = sig  # type: ignore[attr-defined]
            wrapper.vp_app = app  # type: ignore[attr-defined]  # lets _Tool.run find the app's result hooks
            doc = inspect.cleandoc(description) if description else inspect.getdoc(fn) or ""
            tool_name = name or fn.__name__
            self.tools.append(_build_tool(fn, wrapper, tool_name, doc, annotations))
            self.tool_names.append(tool_name)
            from .toolsets import toolset_for_module

            self.toolset_of[tool_name] = toolset or toolset_for_module(fn.__module__)
            return fn

        return decorator


class _Tool(Tool):
    """Every call passes here: unknown argument names are refused, argument-validation failures read
    like every other error (`INVALID_ARGUMENT: field: why`), every result has text content, and what
    the body reported (warnings, a changed tool list) reaches the client."""

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        found = argcheck.unknown_arguments(self.parameters, arguments) if isinstance(arguments, dict) else []
        if found:
            raise ToolError(f"Error executing tool {self.name}: {argcheck.unknown_argument_message(self.name, found)}")
        state = _CallState()
        token = _CALL.set(state)
        try:
            result = await super().run(arguments, context, convert_result)
        except ToolError as exc:
            # The SDK validates arguments before our wrapper runs and reports pydantic's raw text.
            if isinstance(exc.__cause__, pydantic.ValidationError) and not isinstance(exc, UnexpectedToolError):
                message = _validation_message(exc.__cause__)
                raise ToolError(f"Error executing tool {self.name}: INVALID_ARGUMENT: {message}; "
                                "correct the named argument(s) and call again") from exc.__cause__
            raise
        finally:
            _CALL.reset(token)
        if isinstance(result, CallToolResult):
            result = self._visible(result, state.warnings)
        app = getattr(self.fn, "vp_app", None)
        if convert_result and app is not None:
            for hook in app.result_hooks.get(self.name, ()):
                result = hook(result)
        if state.tools_changed:
            await _notify_tools_changed(context)
        return result

    def _visible(self, result: CallToolResult, warnings: list[str]) -> CallToolResult:
        """Text content for every result: `null` for None, one JSON array for a list, plus warnings."""
        data = result.structured_content
        wrapped = self.fn_metadata.wrap_output and isinstance(data, dict) and "result" in data
        value = data["result"] if wrapped else data
        content = list(result.content)
        if not content or (wrapped and isinstance(value, list)):
            # The SDK sends no content for None and one block per item for a list (none when empty).
            content = [TextContent(type="text", text=json.dumps(value, indent=2, ensure_ascii=False))]
        if warnings and isinstance(data, dict):
            data = {**data, "warnings": warnings}
            if wrapped or not content or len(content) != 1:
                content.append(TextContent(type="text", text=json.dumps({"warnings": warnings}, ensure_ascii=False)))
            else:
                content = [TextContent(type="text", text=json.dumps(data, indent=2, ensure_ascii=False))]
        return result.model_copy(update={"content": content, "structured_content": data})


async def _notify_tools_changed(context: Any) -> None:
    """notifications/tools/list_changed on both protocol eras (each drops what it does not carry)."""
    # No session (a direct call) or a closed stream: nothing to tell, and the call itself succeeded.
    with contextlib.suppress(Exception):
        await context.session.send_tool_list_changed()  # handshake era (stdio clients today)
    with contextlib.suppress(Exception):
        await context.notify_tools_changed()  # 2026-07-28 era: subscriptions/listen streams


# Building a tool's argument model and JSON schema is the costly part of start-up; it depends only
# on the function's code, so apps in one process (tests, doctor) build it once and copy it.
_TOOL_TEMPLATES: dict[tuple[str, str, str], Tool] = {}


def _build_tool(fn: Callable[..., Any], wrapper: Callable[..., Any], name: str, doc: str,
                annotations: ToolAnnotations) -> Tool:
    key = (fn.__module__, fn.__qualname__, name)
    template = _TOOL_TEMPLATES.get(key)
    if template is None:
        built = Tool.from_function(wrapper, name=name, description=doc, annotations=annotations)
        # What tools/list sends: no generated titles, optional `anyOf [T, null]` as T (arguments.py).
        built.parameters = argcheck.lean_schema(built.parameters)
        if built.fn_metadata.output_schema is not None:
            built.fn_metadata.output_schema = argcheck.lean_schema(built.fn_metadata.output_schema)
        template = _Tool.model_construct(**{field: getattr(built, field) for field in Tool.model_fields})
        _TOOL_TEMPLATES[key] = template
    return template.model_copy(update={"fn": wrapper})


def check_name(value: Any, field: str) -> str:
    """An orchestrator / instance id: a non-empty string of reasonable length."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{field} must be a non-empty string")
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidArgument(f"{field} is longer than {MAX_NAME_LENGTH} characters")
    return value.strip()


def require_text(value: Any, field: str, *, max_bytes: int | None = None) -> str:
    """A required free-text argument: non-empty after trimming, optionally bounded in UTF-8 bytes."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{field} must be a non-empty string")
    if max_bytes is not None and len(value.encode("utf-8", "surrogatepass")) > max_bytes:
        raise InvalidArgument(f"{field} is larger than {max_bytes} bytes")
    return value


MAX_QUERY_BYTES = 32_768  # every search tool accepts the same query size


def require_query(value: Any, field: str = "query") -> str:
    """A search query: non-empty, at most MAX_QUERY_BYTES of UTF-8 (FTS quoting makes any text safe)."""
    return require_text(value, field, max_bytes=MAX_QUERY_BYTES)
