"""Schema-driven hostile arguments for every registered tool (used by test_fuzz.py and benchmarks/fuzz.py).

From each tool's `inputSchema` (tools/list): a plausible baseline, then one mutation per case —
missing fields, wrong types, huge values, deep nesting, NUL and lone surrogates, FTS/SQL
metacharacters, forged cursors, unknown fields, extreme numbers.
"""

from __future__ import annotations

import base64
import json
import random
import re
from typing import Any

CODED = re.compile(r"^[A-Z][A-Z0-9_]+: ")
PREFIX = re.compile(r"^Error executing tool [^:]+: ")

META = ["'; DROP TABLE messages; --", '" OR 1=1 --', "AND OR NOT", "NEAR(a b)", "col:x*", "(((", "^*:",
        '"""', "%_\\", "a\" b' c", "\\x00", "-- /* */", "content : (x)", "nsKey : n00*"]
WEIRD = ["\x00", "a\x00b", "\ud800", "x\udfffy", "\ufeff", "\u202e", "🚀" * 50, "\n\r\t", " ", ""]


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


FORGED_CURSORS = [
    _b64(b"[" * 985 + b"]" * 985),
    _b64(b"{" * 2000),
    _b64(json.dumps({"t": [1, 2], "i": 5}).encode()),
    _b64(json.dumps({"t": 10**30, "i": "x"}).encode()),
    _b64(json.dumps({"createdBefore": "yesterday"}).encode()),
    _b64(b"\xff\xfe\x00"),
    "!!!not base64!!!",
    "A" * 100_000,
    _b64(json.dumps({"t": "a" * 5000, "i": "b"}).encode()),
]


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref:
        return defs.get(ref.rsplit("/", 1)[-1], {})
    return node


def _types(node: dict[str, Any], defs: dict[str, Any]) -> list[dict[str, Any]]:
    node = _resolve(node, defs)
    if "anyOf" in node or "oneOf" in node:
        out = []
        for alt in node.get("anyOf") or node.get("oneOf"):
            out.extend(_types(alt, defs))
        return out
    return [node]


def sample(node: dict[str, Any], defs: dict[str, Any], rng: random.Random, depth: int = 0) -> Any:
    """A plausible value for a schema node."""
    alts = [a for a in _types(node, defs) if a.get("type") != "null"] or [{"type": "null"}]
    alt = rng.choice(alts)
    if "enum" in alt:
        return rng.choice(alt["enum"])
    if "const" in alt:
        return alt["const"]
    kind = alt.get("type")
    if kind == "string":
        return rng.choice(["alice", "bob", "note", "x", "2026-05-29", "todo", "general"])
    if kind == "integer":
        return rng.choice([0, 1, 5, 1_700_000_000_000])
    if kind == "number":
        return rng.choice([0.5, 1, 100])
    if kind == "boolean":
        return rng.choice([True, False])
    if kind == "array":
        if depth > 3:
            return []
        return [sample(alt.get("items", {}), defs, rng, depth + 1) for _ in range(rng.randint(0, 2))]
    if kind == "object" or "properties" in alt:
        if depth > 3:
            return {}
        props = alt.get("properties", {})
        return {k: sample(v, defs, rng, depth + 1) for k, v in props.items()
                if k in alt.get("required", []) or rng.random() < 0.5}
    return rng.choice(["x", 1, None])


def wrong_type(node: dict[str, Any], defs: dict[str, Any], rng: random.Random) -> Any:
    kinds = {a.get("type") for a in _types(node, defs)}
    pool = [v for k, v in (("string", "not-a-number"), ("integer", 12345), ("number", 1.5), ("boolean", True),
                            ("array", ["a", 1]), ("object", {"k": [1]}), ("null", None)) if k not in kinds]
    return rng.choice(pool or ["x"])


def deep(depth: int, rng: random.Random) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value] if rng.random() < 0.5 else {"k": value}
    return value


def huge(node: dict[str, Any], defs: dict[str, Any], rng: random.Random) -> Any:
    kinds = {a.get("type") for a in _types(node, defs)}
    if "array" in kinds:
        return ["x"] * rng.choice([10_001, 50_000])
    if "integer" in kinds or "number" in kinds:
        return rng.choice([2**70, -(2**70), 10**300, 1e308, -1, float("inf"), float("nan")])
    if "object" in kinds:
        return {f"k{i}": "v" * 100 for i in range(rng.choice([1_000, 20_000]))}
    return rng.choice(["a" * 1_100_000, "word " * 220_000, "é" * 400_000])


CLASSES = ["valid", "missing", "wrong_type", "huge", "deep", "weird_text", "metachar", "cursor", "extra",
           "all_wrong"]


def make_case(tool: Any, kind: str, rng: random.Random) -> dict[str, Any]:
    schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None) or {}
    defs = schema.get("$defs", {})
    props: dict[str, Any] = schema.get("properties", {})
    required = schema.get("required", [])
    args = {k: sample(v, defs, rng) for k, v in props.items() if k in required or rng.random() < 0.6}
    names = list(props) or ["x"]
    field = rng.choice(names)
    node = props.get(field, {})
    strings = [k for k, v in props.items() if any(a.get("type") == "string" for a in _types(v, defs))] or names
    if kind == "missing":
        for k in required:
            if rng.random() < 0.7:
                args.pop(k, None)
    elif kind == "wrong_type":
        args[field] = wrong_type(node, defs, rng)
    elif kind == "huge":
        args[field] = huge(node, defs, rng)
    elif kind == "deep":
        args[field] = deep(rng.choice([70, 200, 900]), rng)
    elif kind == "weird_text":
        args[rng.choice(strings)] = rng.choice(WEIRD) + rng.choice(["", "tail", " x "])
    elif kind == "metachar":
        args[rng.choice(strings)] = rng.choice(META)
    elif kind == "cursor":
        target = "cursor" if "cursor" in props else rng.choice(strings)
        args[target] = rng.choice(FORGED_CURSORS)
    elif kind == "extra":
        args[rng.choice(["bogus", "__proto__", "from_", "", "a" * 300])] = rng.choice([1, "x", None, {"a": 1}])
    elif kind == "all_wrong":
        args = {k: wrong_type(v, defs, rng) for k, v in props.items()}
    return args


class WireServer:
    """An app served by our stdio transport over OS pipes, in a thread of this process: raw JSON-RPC
    lines in, replies out — the wire path, which carries what the SDK client refuses to serialize
    (200-deep values, lone surrogates, NaN)."""

    def __init__(self, app: Any) -> None:
        import os
        import threading

        import anyio

        from vantage_peers.transport import serve_stdio

        r_in, w_in = os.pipe()
        r_out, w_out = os.pipe()
        stdin, stdout = os.fdopen(r_in, "rb"), os.fdopen(w_out, "wb")
        self.to_server, self.from_server = os.fdopen(w_in, "wb"), os.fdopen(r_out, "rb")
        self.thread = threading.Thread(target=lambda: anyio.run(serve_stdio, app.mcp, stdin, stdout), daemon=True)
        self.thread.start()
        self.next_id = 0
        init = self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                           "clientInfo": {"name": "fuzz", "version": "1"}}, 60)
        assert "result" in init, init
        self.send_line(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        self.tools = self.request("tools/list", {}, 60)["result"]["tools"]

    def send_line(self, line: str) -> None:
        self.to_server.write(line.encode("utf-8") + b"\n")
        self.to_server.flush()

    def request(self, method: str, params: Any, timeout: float) -> dict[str, Any] | None:
        """The reply to one request, or None when none came within `timeout` seconds."""
        import select

        self.next_id += 1
        rid = self.next_id
        # ensure_ascii escapes lone surrogates as \\ud800 (valid JSON); NaN/Infinity go out as literals.
        self.send_line(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
        while True:
            ready, _, _ = select.select([self.from_server], [], [], timeout)
            if not ready:
                return None
            reply = json.loads(self.from_server.readline())
            if reply.get("id") == rid:
                return reply

    def close(self) -> None:
        self.to_server.close()
        self.thread.join(timeout=30)


def classify_reply(reply: dict[str, Any] | None) -> str:
    """'ok', the error code (tool error), 'JSONRPC_<code>', 'UNANSWERED' or 'UNCODED'."""
    if reply is None:
        return "UNANSWERED"
    if "error" in reply:
        return f"JSONRPC_{reply['error'].get('code')}"
    result = reply.get("result", {})
    if not result.get("isError"):
        return "ok"
    text = "\n".join(c.get("text", "") for c in result.get("content", []))
    m = CODED.match(PREFIX.sub("", text, count=1))
    return m.group(0)[:-2] if m else "UNCODED"


def run_fuzz(app: Any, calls_per_tool: int, rng: random.Random, bound_s: float,
             on_bad: Any = None) -> dict[str, int]:
    """Fuzz every listed tool over the wire; returns class counts (`on_bad(text)` for each bad reply)."""
    from collections import Counter

    wire = WireServer(app)
    counts: Counter[str] = Counter()
    try:
        for tool in sorted(wire.tools, key=lambda t: t["name"]):
            schema = type("T", (), {"input_schema": tool.get("inputSchema", {})})
            for i in range(calls_per_tool):
                kind = CLASSES[i % len(CLASSES)] if i < len(CLASSES) else rng.choice(CLASSES)
                args = make_case(schema, kind, rng)
                reply = wire.request("tools/call", {"name": tool["name"], "arguments": args}, bound_s)
                code = classify_reply(reply)
                counts[code] += 1
                if code in ("UNANSWERED", "UNCODED", "INTERNAL_ERROR") and on_bad is not None:
                    on_bad(f"{tool['name']} [{kind}] {code}: {json.dumps(reply)[:300]} for {str(args)[:200]}")
                if code == "UNANSWERED":
                    return dict(counts)  # the wire is out of step now; stop here
    finally:
        wire.close()
    return dict(counts)
