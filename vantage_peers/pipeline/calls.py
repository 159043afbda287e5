"""The call pipeline: the one path every tool call takes between the SDK and a tool body.

    transport → SDK → before (toolset enabled, strict argument names, depth)
              → SDK validation (pydantic, against the tool's schema)
              → run, in a worker thread (a quick tool on SQLite: on the event loop, onloop.py): wire
                names → integer ranges → resolve the caller and apply the tool's declared policies
                (policy.py: scope, identity, namespaces, master-only)
                → presence → the body in its DB scope (record ownership checked in the body's own
                transaction) → one error ladder (`ladder`)
              → shaping (visible text, `warnings`, result hooks, tools/list_changed) → transport

`app.py` only registers tools; `server.py` only composes. Everything cross-cutting is here.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import inspect
import json
import sys
import traceback
from collections.abc import Callable
from typing import Annotated, Any, get_args, get_origin

import apsw
import pydantic
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from mcp.types import Tool as MCPTool
from pydantic.fields import FieldInfo

from ..core import limits, sdk
from ..core.compact import dense_json, indented_json
from ..core.errors import Busy, InternalError, InvalidArgument, VantageError
from ..core.rbac import Actor
from ..db import BUSY_ERRORS
from ..db.faults import storage_error
from . import arguments as argcheck
from . import deferred, idempotency, onloop, policy, prebuilt
from .host import Host as App  # the App as the pipeline sees it (app.py builds on this module)
from .toolsets import check_enabled

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # SQLite's integer range


@dataclasses.dataclass
class CallState:
    """One call as it runs: who is calling, and what the body reported besides its return value."""

    actor: Actor = dataclasses.field(default_factory=Actor)
    read_prefixes: tuple[str, ...] | None = None
    readers: tuple[str, ...] | None = None  # whose messages and tasks it reads (None: all)
    warnings: list[str] = dataclasses.field(default_factory=list)
    notices: dict[str, Any] = dataclasses.field(default_factory=dict)  # structured fields added to the result
    tools_changed: bool = False

    def restart(self) -> None:
        """Forget what a first attempt reported: the call runs again from the start (calls.runner)."""
        self.warnings.clear()
        self.notices.clear()
        self.tools_changed = False


# Set by PipelineTool.run around each call; the body runs in a worker thread that sees a copy of this
# context, so it reaches the same CallState object.
_CALL: contextvars.ContextVar[CallState | None] = contextvars.ContextVar("vp_call", default=None)


def current() -> CallState | None:
    return _CALL.get()


def refuse(tool: str, message: str) -> ToolError:
    """The one place the SDK's "Error executing tool X:" prefix is built (for refusals made before
    the SDK's own wrapper runs, so they read exactly like those made after it)."""
    return ToolError(f"Error executing tool {tool}: {message}")


def validation_message(err: pydantic.ValidationError) -> str:
    parts = []
    for e in err.errors()[:5]:
        loc = ".".join(str(p) for p in e.get("loc", ())) or "value"
        parts.append(f"{loc}: required argument is missing" if e.get("type") == "missing" else f"{loc}: {e.get('msg')}")
    return "; ".join(parts)


def ladder(tool: str, exc: BaseException, busy_ms: int, db: Any = None) -> VantageError:
    """Every failure of a body as a coded error: the one error ladder."""
    if isinstance(exc, VantageError):
        return exc
    stored = storage_error(exc, db)  # STORAGE_FULL / STORAGE_READ_ONLY / STORAGE_IO (db/faults.py)
    if stored is not None:
        return stored
    if isinstance(exc, BUSY_ERRORS):
        # A lock met outside db.read/db.write's retries (which raise Busy themselves).
        return Busy(f"the database is locked by another process (waited up to {busy_ms} ms, "
                    "VP_BUSY_TIMEOUT_MS); retry shortly")
    if isinstance(exc, apsw.InterruptError):
        return Busy("the query was interrupted; retry shortly")
    if isinstance(exc, pydantic.ValidationError):
        return InvalidArgument(validation_message(exc))
    if isinstance(exc, OverflowError):
        # A nested integer beyond SQLite's 64-bit range (top-level ones are named before the body).
        return InvalidArgument("an integer argument is out of range: integers must fit in 64 bits")
    if isinstance(exc, UnicodeEncodeError):
        # JSON allows an unpaired UTF-16 surrogate ("\\ud800") that UTF-8 (and SQLite) cannot store.
        return InvalidArgument("a text argument holds an unpaired surrogate (invalid Unicode); send valid UTF-8 text")
    if isinstance(exc, RecursionError):
        return InvalidArgument(limits.depth_message())
    # Never a bare "Error executing tool X": the agent gets a code, stderr the traceback.
    with contextlib.suppress(Exception):  # stderr may be gone (a full disk): the reply still has its code
        traceback.print_exception(exc, file=sys.stderr)
    return InternalError(f"{tool} failed unexpectedly ({type(exc).__name__}); retry, and report it if it persists")


@dataclasses.dataclass(frozen=True)
class Registered:
    """A tool as registered: its body, its declared policy, and its wire names."""

    name: str
    fn: Callable[..., Any]
    policy: policy.Policy
    aliases: dict[str, str]  # wire alias -> Python parameter

    @property
    def wire_names(self) -> dict[str, str]:
        return {param: alias for alias, param in self.aliases.items()}


def aliases_of(sig: inspect.Signature) -> dict[str, str]:
    """Wire alias -> Python parameter name, for parameters declared `Annotated[..., Field(alias=...)]`."""
    out = {}
    for name, param in sig.parameters.items():
        ann = param.annotation
        if get_origin(ann) is Annotated:
            for meta in get_args(ann)[1:]:
                if isinstance(meta, FieldInfo) and meta.alias:
                    out[meta.alias] = name
    return out


def runner(app: App, reg: Registered) -> Callable[..., Any]:
    """The function the SDK calls with validated arguments (in a worker thread for sync bodies)."""
    wire_names = reg.wire_names

    @functools.wraps(reg.fn)
    def run(**kwargs: Any) -> Any:
        state = current() or CallState()
        try:
            kwargs = {reg.aliases.get(k, k): v for k, v in kwargs.items()}
            for key, value in kwargs.items():
                if (isinstance(value, int) and not isinstance(value, bool) and key != "limit"  # limits clamp
                        and not INT64_MIN <= value <= INT64_MAX):
                    raise InvalidArgument(f"{wire_names.get(key, key)} is out of range: integers must fit "
                                          "in 64 bits (timestamps are Unix ms)")
            principal = sdk.current_principal()
            actor, kwargs = policy.resolve(reg.name, reg.policy, kwargs, principal, app.settings)
            state.actor, state.read_prefixes = actor, policy.read_prefixes(principal)
            state.readers = policy.readers_of(principal)
            policy.namespaces(reg.name, reg.policy, kwargs, principal, app.namespace_of)  # scoped tokens only
            for hook in app.before_call_hooks:
                kwargs = hook(reg.name, kwargs) or kwargs
            app.touch_presence(*policy.presence_of(principal, app.settings))
            with app.db.call_scope() as scope:  # one lock-wait budget and search budget per call
                result = _body(app, reg, kwargs, actor)
                if scope.truncated and isinstance(result, dict):
                    result["truncated"] = True  # a search stopped at its time budget (search/budget.py)
                return result
        except Exception as exc:
            err = ladder(reg.name, exc, app.settings.busy_timeout_ms, app.db)
            if err is exc:
                raise
            raise err from exc

    if not reg.policy.quick:
        return run
    return onloop.on_loop(app, reg.fn, run, _restart)


def _restart() -> None:
    state = current()
    if state is not None:
        state.restart()


def _body(app: App, reg: Registered, kwargs: dict[str, Any], actor: Actor) -> Any:
    """The body, with its record-ownership rules checked in the same transaction as its writes (a
    record cannot change hands between the check and the act), and, for a call with an idempotency
    key, the key looked up and recorded in that transaction too."""
    key = kwargs.pop(idempotency.ARGUMENT, None) if reg.policy.idempotent else None
    if key is None and not reg.policy.owns:
        return reg.fn(**kwargs)

    def checked(conn: Any) -> Any:
        if reg.policy.owns:
            policy.owners(reg.name, reg.policy, kwargs, actor, conn, app.records)
        return reg.fn(**kwargs)

    if key is not None:
        return _once(app, reg, kwargs, actor, idempotency.check_key(key), checked)
    return app.db.read(checked) if reg.policy.read_only else app.db.write(checked)


def _once(app: App, reg: Registered, kwargs: dict[str, Any], actor: Actor, key: str,
          body: Callable[[Any], Any]) -> Any:
    """`body(conn)` at most once per (caller, key): a replay answers the first result and warnings."""
    caller = actor.identity or (f"profile:{actor.profile}" if actor.profile else "local")
    payload = idempotency.digest(reg.name, kwargs)

    def run(conn: Any) -> Any:
        first = idempotency.replay(conn, caller=caller, key=key, tool=reg.name, payload=payload)
        if first is not idempotency.MISSING:
            result, warnings = first
            for line in warnings:  # the retry reads exactly what the first call answered
                app.warn(line)
            return result
        result = body(conn)
        state = current()
        idempotency.record(conn, caller=caller, key=key, tool=reg.name, payload=payload, result=result,
                           warnings=list(state.warnings) if state else [])
        return result

    return app.db.write(run)


_LISTED = ("parameters", "output_schema")
_BUILT = ("fn_metadata", "context_kwarg", "resolved_params", "resolver_plans")


class PipelineTool(Tool):
    """The SDK's Tool with our stages before and after its validation and call.

    Made without its schemas (build_tool): `parameters` and `output_schema` are filled when first
    read (a listing), the argument model and the rest of the SDK's build before the first call."""

    def __getattr__(self, name: str) -> Any:
        shape = getattr(self.__dict__.get("fn"), "vp_shape", None)
        if shape is not None and name in _LISTED:
            self.__dict__.update(zip(_LISTED, shape.listing(), strict=True))
            return self.__dict__[name]
        if shape is not None and name in _BUILT:
            self._complete()
            return self.__dict__[name]
        return super().__getattr__(name)  # type: ignore[misc]

    @property
    def output_schema(self) -> dict[str, Any] | None:  # type: ignore[override]
        return self.__dict__["output_schema"] if "output_schema" in self.__dict__ else self.__getattr__("output_schema")

    def _complete(self) -> None:
        built = self.fn.vp_shape.build()
        self.__dict__.update({field: getattr(built, field) for field in _BUILT},
                             parameters=built.parameters, output_schema=built.fn_metadata.output_schema)

    def listing(self) -> Any:
        """This tool as tools/list shows it (what MCPServer.list_tools makes of each tool)."""
        return MCPTool(name=self.name, title=self.title, description=self.description, input_schema=self.parameters,
                       output_schema=self.output_schema, annotations=self.annotations, icons=self.icons,
                       _meta=self.meta)

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        if "fn_metadata" not in self.__dict__:
            self._complete()  # the first call: the argument model the SDK validates with
        app: App | None = getattr(self.fn, "vp_app", None)
        if app is not None:
            try:
                check_enabled(app, self.name)
            except VantageError as exc:
                raise refuse(self.name, str(exc)) from None
            await deferred.register_enabled(app)  # a stdio server's first call: its domains' hooks
        if isinstance(arguments, dict):
            found = argcheck.unknown_arguments(self.parameters, arguments)
            if found:
                raise refuse(self.name, argcheck.unknown_argument_message(self.name, found))
            if limits.depth_exceeds(arguments, limits.MAX_DEPTH + 1):  # the arguments object is one level
                raise refuse(self.name, InvalidArgument(limits.depth_message()).args[0])
        state = CallState()
        token = _CALL.set(state)
        try:
            # Converted here rather than by the SDK (convert_result): a list answer gets one text block,
            # not one per item that _visible would throw away.
            result = await super().run(arguments, context, False)
            if convert_result:
                result = self._converted(result)
        except ToolError as exc:
            # The SDK validates arguments before our runner and reports pydantic's raw text.
            if isinstance(exc.__cause__, pydantic.ValidationError) and not isinstance(exc, UnexpectedToolError):
                raise refuse(self.name, f"INVALID_ARGUMENT: {validation_message(exc.__cause__)}; correct the "
                                        "named argument(s) and call again") from exc.__cause__
            raise
        finally:
            _CALL.reset(token)
        if isinstance(result, CallToolResult):
            result = self._visible(result, state.warnings, state.notices,
                                   dense=app is not None and self.name in app.dense_text)
        if convert_result and app is not None:
            for hook in app.result_hooks.get(self.name, ()):
                result = hook(result)
        if state.tools_changed:
            await _notify_tools_changed(context)
        return result

    def _converted(self, result: Any) -> Any:
        """The SDK's convert_result (FuncMetadata.convert_result: the same validation and the same
        structuredContent), except that a wrapped list gets no per-item text: _visible writes its one
        block. A failure is the SDK's own: a crash whose text stays on the server."""
        meta = self.fn_metadata
        try:
            if not (meta.wrap_output and meta.output_schema is not None and isinstance(result, list)):
                return meta.convert_result(result)
            adapter = meta._output_adapter(meta.output_model)  # built once per tool by the SDK
            validated = adapter.validate_python({"result": result}, by_alias=True, by_name=True)
            data = (validated.model_dump(mode="json", by_alias=True) if isinstance(validated, pydantic.BaseModel)
                    else adapter.dump_python(validated, mode="json", by_alias=True))
            return CallToolResult(content=[], structured_content=data)
        except Exception as exc:
            raise UnexpectedToolError(f"Error executing tool {self.name}") from exc

    def _visible(self, result: CallToolResult, warnings: list[str],
                 notices: dict[str, Any] | None = None, *, dense: bool = False) -> CallToolResult:
        """Text content for every result: `null` for None, one JSON array for a list, plus warnings and
        notices (fields a hook added to this answer, e.g. `inheritedLeases`; a body's own keys win).
        `dense`: the one text block is compact JSON rather than indented (core/compact.py)."""
        render = dense_json if dense else indented_json
        data = result.structured_content
        wrapped = self.fn_metadata.wrap_output and isinstance(data, dict) and "result" in data
        value = data["result"] if wrapped else data
        content = list(result.content)
        # The SDK sends no content for None and one block per item for a list (none when empty); a
        # dense tool's one block it wrote indented.
        if (not content or (wrapped and isinstance(value, list))
                or (dense and isinstance(data, dict) and len(content) == 1 and content[0].type == "text")):
            content = [TextContent(type="text", text=render(value))]
        extra = {k: v for k, v in (notices or {}).items() if not (isinstance(data, dict) and k in data)}
        if warnings and (extra or isinstance(data, dict)):
            extra["warnings"] = warnings
        if extra and not isinstance(data, dict):  # a None result: notices still reach the agent, as text
            content.append(TextContent(type="text", text=json.dumps(extra, ensure_ascii=False)))
        elif extra:
            data = {**data, **extra}
            if wrapped or not content or len(content) != 1:
                content.append(TextContent(type="text", text=json.dumps(extra, ensure_ascii=False)))
            else:
                content = [TextContent(type="text", text=render(data))]
        return result.model_copy(update={"content": content, "structured_content": data})


async def _notify_tools_changed(context: Any) -> None:
    """notifications/tools/list_changed on both protocol eras (each drops what it does not carry)."""
    # No session (a direct call) or a closed stream: nothing to tell, and the call itself succeeded.
    with contextlib.suppress(Exception):
        await context.session.send_tool_list_changed()  # handshake era (stdio clients today)
    with contextlib.suppress(Exception):
        await context.notify_tools_changed()  # 2026-07-28 era: subscriptions/listen streams


def _signature(reg: Registered, sig: inspect.Signature | None) -> inspect.Signature:
    """The signature the SDK sees: the body's, plus the pipeline's own `idempotencyKey` argument
    (the body never sees it) on an idempotent tool."""
    sig = sig or prebuilt.signature_of(reg.fn)
    if reg.policy.idempotent:
        extra = inspect.Parameter(idempotency.ARGUMENT, inspect.Parameter.KEYWORD_ONLY, default=None,
                                  annotation=str | None)
        params = list(sig.parameters.values())
        sig = sig.replace(parameters=[*params, extra] if not any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in params) else params)
    return sig


# A tool's schemas and argument model depend only on its function's code: apps in one process
# (tests, doctor) share one Shape per tool, which lists from prebuilt schemas and builds in full on
# the first call (prebuilt.py).
_SHAPES: dict[tuple[str, str, str], prebuilt.Shape] = {}


def build_tool(app: App, reg: Registered, doc: str, annotations: ToolAnnotations,
               sig: inspect.Signature | None = None) -> Tool:
    run = runner(app, reg)
    run.__signature__ = _signature(reg, sig)  # type: ignore[attr-defined]
    run.vp_app = app  # type: ignore[attr-defined]  # PipelineTool.run finds the app's toolsets and hooks
    key = (reg.fn.__module__, reg.fn.__qualname__, reg.name)
    shape = _SHAPES.get(key)
    if shape is None:
        shape = _SHAPES[key] = prebuilt.Shape(reg.name, run, doc, annotations, run.__signature__)
    run.vp_shape = shape  # type: ignore[attr-defined]
    # Nothing is built here: `parameters` (listing) and `fn_metadata` (a call) are filled on first use.
    return PipelineTool.model_construct(fn=run, name=reg.name, description=doc, annotations=annotations,
                                        is_async=inspect.iscoroutinefunction(run))
