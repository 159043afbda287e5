"""Tool schemas as clients see them, and strict argument names.

`lean_schema` shrinks a generated JSON schema without changing what it accepts in practice: the
`title` keys pydantic generates are dropped (and the class docstrings of nested models), an optional
`anyOf [T, null]` becomes `T` (the argument is simply not required), defaults that say nothing go
(`null`, a flag's `false`, `fields`' `full`, which the server instructions state once),
`additionalProperties: false` goes (the pipeline refuses unknown names itself, nested ones included,
with a suggestion), upper size guards go (`maxLength`, `maxItems`: the argument model still enforces
them and its refusal names the limit), and names, types, enums, `required` and value ranges stay. `lean_output_schema` also writes an
output's `anyOf [{type: T}, {type: null}]` as `type: [T, "null"]` (clients validate results, models
never read them; input schemas keep `anyOf`, which every model provider accepts) and drops the
`required: [result]` of the SDK's `{result: …}` wrapper (the server always sends it).

`unknown_arguments` walks the same schema against a call's arguments, nested objects included,
so a misspelled name is refused with the nearest known one instead of being silently ignored
(a dropped filter widens a query; a dropped field loses data).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from typing import Any

_NULL = {"type": "null"}
# Upper size bounds guard the server against abuse; no well-formed call comes near them.
_SIZE_GUARDS = ("maxLength", "maxItems", "maxProperties")
_CHILD_MAPS = ("properties", "$defs", "definitions", "patternProperties")


def lean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return _inline_single_refs(_lean(schema))


def _inline_single_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """A `$defs` entry referenced once is written in place (its `$ref` and name cost more than they
    save); one used twice or recursive stays a reference."""
    defs = schema.get("$defs")
    if not isinstance(defs, dict):
        return schema
    text = json.dumps(schema)
    once = {name for name in defs if text.count(f'"#/$defs/{name}"') == 1
            and f'"#/$defs/{name}"' not in json.dumps(defs[name])}

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in once:
            return {**walk(defs[ref[8:]]), **{k: walk(v) for k, v in node.items() if k != "$ref"}}
        return {k: walk(v) for k, v in node.items()}

    out = {k: walk(v) for k, v in schema.items() if k != "$defs"}
    kept = {name: walk(sub) for name, sub in defs.items() if name not in once}
    return {"$defs": kept, **out} if kept else out


def lean_output_schema(schema: dict[str, Any]) -> dict[str, Any]:
    out = _bottom_up(_bottom_up(_lean(schema), _type_list), _untyped_items)
    if set(out.get("properties", {})) == {"result"} and out.get("required") == ["result"]:
        del out["required"]  # the SDK's wrapper of a plain return value: `result` is always there
    return out


def _bottom_up(node: Any, rewrite: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """A copy of `node` with `rewrite` applied to every object in it, its members first."""
    if isinstance(node, list):
        return [_bottom_up(item, rewrite) for item in node]
    if not isinstance(node, dict):
        return node
    return rewrite({key: _bottom_up(value, rewrite) for key, value in node.items()})


def _untyped_items(out: dict[str, Any]) -> dict[str, Any]:
    """An array of bare objects (`list[dict[str, Any]]`) as a bare array: a client validating the
    answer checks each item against `{"type": "object"}` otherwise — for the Python SDK's client,
    a `jsonschema` descent per item (110 µs of a 20-message check_messages, #34) to learn nothing the
    description does not say."""
    if out.get("type") == "array" and out.get("items") == {"type": "object"}:
        del out["items"]
    return out


def _type_list(out: dict[str, Any]) -> dict[str, Any]:
    """`anyOf` of bare types as one type list (`{"type": ["object", "null"]}`)."""
    branches = out.get("anyOf")
    if (isinstance(branches, list) and branches
            and all(isinstance(b, dict) and set(b) == {"type"} and isinstance(b["type"], str) for b in branches)):
        del out["anyOf"]
        out["type"] = [b["type"] for b in branches]
    return out


# Defaults a model needs no telling: a flag is off unless passed; `fields` is `full` unless `lite`;
# `detail` is `compact` unless `full` (the server instructions say so once, issue 34).
_SILENT_DEFAULTS: tuple[tuple[str | None, Any], ...] = ((None, False), ("fields", "full"), ("detail", "compact"))


def _lean(node: Any) -> Any:
    if isinstance(node, list):
        return [_lean(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    required = set(node.get("required", ()))
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue  # generated ("Assignedto", "list_tasksArguments"): noise for a model
        if key in _SIZE_GUARDS and isinstance(value, int):
            continue  # still enforced by the argument model; a refusal names the limit
        if key in _CHILD_MAPS and isinstance(value, dict):
            # Keys here are property/definition names (a property may be called `title`).
            out[key] = {name: _lean_child(sub, optional=key == "properties" and name not in required,
                                          definition=key in ("$defs", "definitions"), name=name)
                        for name, sub in value.items()}
        else:
            out[key] = _lean(value)
    if out.get("additionalProperties") is True and "properties" not in out:
        del out["additionalProperties"]  # a free-form object: `true` is JSON Schema's default
    if out.get("additionalProperties") is False and "properties" in out:
        del out["additionalProperties"]  # unknown names are refused by the pipeline (unknown_arguments)
    return out


def _lean_child(sub: Any, *, optional: bool, definition: bool = False, name: str = "") -> Any:
    sub = _lean(sub)
    if definition and isinstance(sub, dict) and "properties" in sub:
        sub.pop("description", None)  # a model's class docstring, written for implementers
    if not optional or not isinstance(sub, dict):
        return sub
    any_of = sub.get("anyOf")
    if isinstance(any_of, list) and _NULL in any_of:
        rest = [branch for branch in any_of if branch != _NULL]
        outer = {k: v for k, v in sub.items() if k != "anyOf"}
        sub = {**rest[0], **outer} if len(rest) == 1 and isinstance(rest[0], dict) else {**outer, "anyOf": rest}
    if "default" in sub and (sub["default"] is None or _silent_default(name, sub["default"])):
        del sub["default"]
    return sub


def _silent_default(name: str, value: Any) -> bool:
    return any((prop is None or prop == name) and type(value) is type(default) and value == default
               for prop, default in _SILENT_DEFAULTS)


# -- strict argument names ----------------------------------------------------------------------
def unknown_arguments(schema: dict[str, Any], arguments: dict[str, Any]) -> list[tuple[str, str | None, list[str]]]:
    """[(dotted path of an unknown argument, nearest known path or None, names known there)]."""
    found: list[tuple[str, str | None, list[str]]] = []
    _check_object(schema, schema, arguments, "", found, top=True)
    return found


def _resolve(root: dict[str, Any], node: Any) -> Any:
    seen = 0
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and seen < 20:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            return {}
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        node, seen = target, seen + 1
    return node


def _branches(root: dict[str, Any], node: Any) -> list[dict[str, Any]]:
    """The alternatives a value may match (anyOf/oneOf/allOf flattened, refs resolved)."""
    node = _resolve(root, node)
    if not isinstance(node, dict):
        return []
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(node.get(key), list):
            out: list[dict[str, Any]] = []
            for branch in node[key]:
                out.extend(_branches(root, branch))
            return out
    return [node]


def _check_value(root: dict[str, Any], node: Any, value: Any, path: str,
                 found: list[tuple[str, str | None, list[str]]]) -> None:
    branches = _branches(root, node)
    if isinstance(value, dict):
        objects = [b for b in branches if b.get("type") == "object" or "properties" in b]
        if not objects or any("properties" not in b or b.get("additionalProperties") for b in objects):
            return  # free-form object (metadata, static …) or not an object schema at all
        merged: dict[str, Any] = {}
        for b in objects:
            merged.update(b["properties"])
        _check_object(root, {"properties": merged}, value, path, found)
    elif isinstance(value, list):
        for b in branches:
            if b.get("type") == "array" and "items" in b:
                for i, item in enumerate(value):
                    _check_value(root, b["items"], item, f"{path}[{i}]", found)
                return


def _check_object(root: dict[str, Any], node: dict[str, Any], value: dict[str, Any], path: str,
                  found: list[tuple[str, str | None, list[str]]], *, top: bool = False) -> None:
    props: dict[str, Any] = node.get("properties", {})
    for key, sub_value in value.items():
        where = f"{path}.{key}" if path else str(key)
        if key not in props:
            near = nearest(str(key), list(props))
            found.append((where, f"{path}.{near}" if path and near else near, list(props)))
            continue
        if top and isinstance(sub_value, str) and sub_value[:1] in ("{", "["):
            # The SDK parses a JSON string for an object/array parameter (Claude Desktop sends those).
            try:
                sub_value = json.loads(sub_value)
            except (ValueError, RecursionError):
                continue
        _check_value(root, props[key], sub_value, where, found)


def _norm(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def nearest(name: str, known: list[str]) -> str | None:
    """The known name closest to `name`: same letters ignoring case and `_` first, then difflib."""
    norm = _norm(name)[:200]  # a name longer than any real one compares on its start
    for candidate in known:
        if _norm(candidate) == norm:
            return candidate
    by_norm = {_norm(c): c for c in known}
    close = difflib.get_close_matches(norm, list(by_norm), n=1, cutoff=0.6)
    return by_norm[close[0]] if close else None


def unknown_argument_message(tool: str, found: list[tuple[str, str | None, list[str]]]) -> str:
    parts = []
    for where, near, known in found[:5]:
        where = where if len(where) <= 80 else where[:77] + "..."  # a hostile key is not echoed whole
        hint = f"; did you mean '{near}'?" if near else f"; known arguments: {', '.join(known) or 'none'}"
        parts.append(f"unknown argument '{where}' for {tool}{hint}")
    return "INVALID_ARGUMENT: " + "; ".join(parts)
