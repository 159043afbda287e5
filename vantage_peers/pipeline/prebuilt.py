"""Tool schemas computed ahead of time, and each tool's argument model built on its first call (#34).

Building a tool's pydantic argument model and JSON schema costs milliseconds a tool: for 133 tools,
two thirds of start-up. `tool_schemas.json`, next to this module, holds what `tools/list` shows of
each tool (input schema, output schema) with a fingerprint of what they are computed from: the
tool's signature (names, kinds, defaults, annotations and their Field metadata), the models,
TypedDicts and enums it reaches, and the pydantic and SDK versions. A tool is then prepared in two
steps, each at most once per process (`Shape`, shared by every App's copy of the tool):

- listed: its schemas come from the file when the fingerprint matches, else from a full build;
- called: the full build, exactly as before (`Tool.from_function`: argument model, output model,
  context parameter), so arguments are validated by the same model with the same errors. Should the
  built schema differ from the stored one (a change the fingerprint cannot see, e.g. a custom type's
  own JSON schema), the built one wins and a line on stderr says the file is stale.

tests/pipeline/test_prebuilt.py checks the file against a fresh build of every tool; after changing
a tool's arguments or return type, regenerate it:
`VP_UPDATE_SNAPSHOTS=1 uv run pytest -n 0 tests/pipeline/test_prebuilt.py`.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import inspect
import json
import re
import sys
import threading
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin, is_typeddict

from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations
from pydantic import BaseModel
from pydantic.version import VERSION as PYDANTIC_VERSION

from . import arguments as argcheck

FILE = Path(__file__).with_name("tool_schemas.json")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # reprs of functions and objects: not stable across runs
# How many shapes this process listed from the file / built in full (tests, benchmarks).
COUNTS = {"listed": 0, "built": 0}


def _sdk_version() -> str:
    """The installed SDK's version, from its dist-info folder's name (importlib.metadata scans every
    installed distribution: milliseconds at each start)."""
    import mcp

    for info in Path(mcp.__file__).resolve().parent.parent.glob("mcp-*.dist-info"):
        return info.name[len("mcp-"):-len(".dist-info")]
    from importlib.metadata import version

    return version("mcp")


_stored: dict[str, Any] | None = None
_stored_lock = threading.Lock()


def stored() -> dict[str, Any]:
    """The file's tools ({} when it is absent, unreadable, or made with other pydantic / SDK versions)."""
    global _stored
    with _stored_lock:
        if _stored is None:
            try:
                data = json.loads(FILE.read_text(encoding="utf-8"))
                ok = data.get("pydantic") == PYDANTIC_VERSION and data.get("mcp") == _sdk_version()
                _stored = data.get("tools", {}) if ok else {}
            except (OSError, ValueError, AttributeError):
                _stored = {}
        return _stored


# -- fingerprint ---------------------------------------------------------------------------------
_TYPES: dict[Any, str] = {}  # a class -> its description (classes do not change in a process)


def fingerprint(sig: inspect.Signature) -> str:
    """A digest of everything in `sig` a tool's schemas are generated from."""
    parts: list[str] = []
    for param in sig.parameters.values():
        parts.append(f"{param.name}:{param.kind.name}:{_stable(repr(param.default))}")
        _describe(param.annotation, parts)
    parts.append("->")
    _describe(sig.return_annotation, parts)
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:20]


def _stable(text: str) -> str:
    return _ADDRESS.sub("", text) if " at 0x" in text else text


def _describe(tp: Any, parts: list[str]) -> None:
    origin = get_origin(tp)
    if origin is Annotated:
        base, *meta = get_args(tp)
        _describe(base, parts)
        parts.extend(_stable(repr(m)) for m in meta)
        return
    if origin is not None:
        parts.append(_stable(repr(origin)))
        for arg in get_args(tp):
            _describe(arg, parts)
        return
    if isinstance(tp, type):
        parts.append(_class(tp))
    else:
        parts.append(_stable(repr(tp)))


def _class(cls: type) -> str:
    known = _TYPES.get(cls)
    if known is not None:
        return known
    _TYPES[cls] = f"{cls.__module__}.{cls.__qualname__}"  # a recursive model refers to itself by name
    parts = [f"{cls.__module__}.{cls.__qualname__}", repr(cls.__doc__)]
    if issubclass(cls, BaseModel):
        parts.append(_stable(repr(cls.model_config)))
        for name, field in cls.model_fields.items():
            parts.append(f"{name}={_stable(repr(field))}")
            _describe(field.annotation, parts)
    elif is_typeddict(cls):
        parts.append(f"{sorted(cls.__required_keys__)}")
        for name, hint in typing.get_type_hints(cls, include_extras=True).items():
            parts.append(name)
            _describe(hint, parts)
    elif issubclass(cls, enum.Enum):
        parts.extend(f"{m.name}={m.value!r}" for m in cls)
    elif dataclasses.is_dataclass(cls):
        for field in dataclasses.fields(cls):
            parts.append(f"{field.name}={_stable(repr(field.default))}")
            _describe(field.type, parts)
    _TYPES[cls] = text = "{" + "|".join(parts) + "}"
    return text


# -- one tool, prepared lazily ---------------------------------------------------------------------
@dataclasses.dataclass
class Shape:
    """What every App's copy of one tool shares: its listed schemas, then its full build."""

    name: str
    fn: Any  # the first App's pipeline runner: its signature is the same in every App
    description: str
    annotations: ToolAnnotations | None
    signature: inspect.Signature
    parameters: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    built: Tool | None = None
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def listing(self) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """(input schema, output schema) as tools/list shows them."""
        with self.lock:
            if self.parameters is None:
                entry = stored().get(self.name)
                if entry is not None and entry.get("fingerprint") == fingerprint(self.signature):
                    self.parameters, self.output_schema = entry["parameters"], entry["outputSchema"]
                    COUNTS["listed"] += 1
                else:
                    self._build()
            return self.parameters, self.output_schema  # type: ignore[return-value]

    def build(self) -> Tool:
        """The tool as the SDK builds it (argument model included), with the listed schemas leaned."""
        with self.lock:
            if self.built is None:
                self._build()
            return self.built  # type: ignore[return-value]

    def _build(self) -> None:
        built = Tool.from_function(self.fn, name=self.name, description=self.description,
                                   annotations=self.annotations)
        # What tools/list sends: no generated titles, optional `anyOf [T, null]` as T (arguments.py).
        built.parameters = argcheck.lean_schema(built.parameters)
        if built.fn_metadata.output_schema is not None:
            built.fn_metadata.output_schema = argcheck.lean_output_schema(built.fn_metadata.output_schema)
        COUNTS["built"] += 1
        if self.parameters is not None and (self.parameters, self.output_schema) != (
                built.parameters, built.fn_metadata.output_schema):
            print(f"vantage-peers: {FILE.name} is stale for {self.name} (its listed schema differed from the "
                  "built one, which is used from now on); regenerate it: VP_UPDATE_SNAPSHOTS=1 pytest tests/pipeline/test_prebuilt.py",
                  file=sys.stderr, flush=True)
        self.parameters, self.output_schema = built.parameters, built.fn_metadata.output_schema
        self.built = built


# -- the file --------------------------------------------------------------------------------------
def generate(shapes: list[Shape]) -> dict[str, Any]:
    """The file's content for `shapes`, each built in full (never read from the file)."""
    tools = {}
    for shape in sorted(shapes, key=lambda s: s.name):
        fresh = Shape(shape.name, shape.fn, shape.description, shape.annotations, shape.signature)
        built = fresh.build()
        if built.context_kwarg is not None or built.resolved_params:
            continue  # a tool that takes the SDK's Context or resolvers is always built in full
        tools[shape.name] = {"fingerprint": fingerprint(shape.signature), "parameters": built.parameters,
                             "outputSchema": built.fn_metadata.output_schema}
    return {"pydantic": PYDANTIC_VERSION, "mcp": _sdk_version(), "tools": tools}


def render(content: dict[str, Any]) -> str:
    # Key order is kept (not sorted): tools/list shows the schemas in exactly this order.
    return json.dumps(content, indent=1, ensure_ascii=False) + "\n"


def app_shapes(app: Any) -> list[Shape]:
    return [tool.fn.vp_shape for tool in app.tools if getattr(tool.fn, "vp_shape", None) is not None]


_SIGNATURES: dict[Any, tuple[Any, Any, inspect.Signature]] = {}  # code -> (defaults, kwdefaults, signature)


def signature_of(fn: Callable[..., Any]) -> inspect.Signature:
    """`fn`'s signature with its string annotations evaluated, cached by code. A tool body is a
    closure that every app makes anew (tests build ~2,000 apps in a process); evaluating its
    annotations was half of building an app. eval_str reads only the module's globals, so one code
    object with the same defaults has one signature."""
    code = getattr(fn, "__code__", None)
    if code is None or hasattr(fn, "__wrapped__") or hasattr(fn, "__signature__"):
        return inspect.signature(fn, eval_str=True)
    cached = _SIGNATURES.get(code)
    if cached is not None and cached[0] == fn.__defaults__ and cached[1] == fn.__kwdefaults__:
        return cached[2]
    sig = inspect.signature(fn, eval_str=True)
    _SIGNATURES[code] = (fn.__defaults__, fn.__kwdefaults__, sig)
    return sig
