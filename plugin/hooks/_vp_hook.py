"""Shared by the vantage-peers plugin hooks (standard library only).

Each hook reads the event JSON Claude Code sends on stdin and answers in its hook protocol:
- pass: exit 0 with no output (the normal permission flow applies);
- block (PreToolUse): exit 2, the reason on stderr, and the same reason as a
  `hookSpecificOutput.permissionDecision = "deny"` object on stdout, so both the exit-code and the
  JSON readings of the protocol deny the call and show Claude the reason and the fix;
- notice (PostToolUse): exit 0 with `systemMessage` (for the user) and
  `hookSpecificOutput.additionalContext` (for Claude).

A hook must never block work by accident: malformed input, an internal error, or running past
its budget (VP_HOOK_TIMEOUT_SECONDS, default 5; hooks.json gives Claude Code a longer timeout,
and a timed-out hook never blocks there either) all end in a silent pass.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

MAX_INPUT_BYTES = 8 * 1024 * 1024  # larger events are passed, unread beyond this
MAX_STRINGS = 2_000  # string values scanned per event


class Block:
    def __init__(self, hook: str, reason: str, fix: str) -> None:
        self.message = f"BLOCKED by vantage-peers hook {hook}: {reason}\nFix: {fix}"


class Notice:
    def __init__(self, event_name: str, text: str, context: str) -> None:
        self.event_name, self.text, self.context = event_name, text, context


Decision = Block | Notice | None


def _arm_budget() -> None:
    try:
        budget = float(os.environ.get("VP_HOOK_TIMEOUT_SECONDS") or 5)
    except ValueError:
        budget = 5.0
    timer = threading.Timer(max(budget, 0.05), lambda: os._exit(0))  # fail open, whatever is running
    timer.daemon = True
    timer.start()


def read_event() -> dict[str, Any] | None:
    data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        return None
    event = json.loads(data.decode("utf-8", "replace"))
    return event if isinstance(event, dict) else None


def tool_name(event: dict[str, Any]) -> str:
    """The tool's own name: `complete_task` for `mcp__vantage-peers__complete_task` and for the
    plugin-scoped `mcp__plugin_vantage-peers_vantage-peers__complete_task`; built-ins unchanged."""
    name = event.get("tool_name")
    if not isinstance(name, str):
        return ""
    if name.startswith("mcp__") and name.count("__") >= 2:
        return name.rsplit("__", 1)[1]
    return name


def tool_input(event: dict[str, Any]) -> dict[str, Any]:
    value = event.get("tool_input")
    return value if isinstance(value, dict) else {}


def strings(value: Any, _depth: int = 0) -> Iterator[str]:
    """Every string inside a JSON value (bounded depth and count)."""
    stack = [(value, 0)]
    seen = 0
    while stack and seen < MAX_STRINGS:
        item, depth = stack.pop()
        if isinstance(item, str):
            seen += 1
            yield item
        elif depth < 8 and isinstance(item, dict):
            stack.extend((v, depth + 1) for v in reversed(list(item.values())))
        elif depth < 8 and isinstance(item, list):
            stack.extend((v, depth + 1) for v in reversed(item))


def has_opt_out(texts: Iterator[str] | list[str], marker: str) -> bool:
    """`// <marker>: <reason>` (or `# <marker>: <reason>`) with a non-empty reason."""
    pattern = re.compile(r"(?://|#)\s*" + re.escape(marker) + r":[ \t]*\S")
    return any(pattern.search(text) for text in texts)


def emit(decision: Decision) -> int:
    if isinstance(decision, Block):
        out = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                      "permissionDecisionReason": decision.message}}
        sys.stdout.write(json.dumps(out, ensure_ascii=False))
        sys.stdout.flush()
        sys.stderr.write(decision.message + "\n")
        sys.stderr.flush()
        return 2
    if isinstance(decision, Notice):
        out = {"systemMessage": decision.text,
               "hookSpecificOutput": {"hookEventName": decision.event_name, "additionalContext": decision.context}}
        sys.stdout.write(json.dumps(out, ensure_ascii=False))
        sys.stdout.flush()
    return 0


def main(check: Callable[[dict[str, Any]], Decision]) -> int:
    try:
        _arm_budget()
        event = read_event()
        # a tool_input that is not an object is malformed input: pass rather than judge it
        malformed = event is None or ("tool_input" in event and not isinstance(event["tool_input"], dict))
        decision = None if malformed else check(event)
    except Exception as exc:  # noqa: BLE001 - fail open: a broken hook must not stop the work
        with contextlib.suppress(Exception):
            sys.stderr.write(f"vantage-peers hook: internal error, passing (fail-open): {exc!r}\n")
        return 0
    try:
        return emit(decision)
    except Exception:  # noqa: BLE001 - e.g. a closed stdout: still never block by accident
        return 0
