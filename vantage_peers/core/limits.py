"""Shape limits on what a caller sends: nesting depth and total size of a request's arguments.

Checked iteratively (a recursive walk is what a 1,000-deep argument would exhaust), by the stdio
transport on every request and by the app wrapper on every tool call (the in-memory and HTTP paths).
"""

from __future__ import annotations

import itertools
import re
from typing import Any

MAX_DEPTH = 64  # no tool argument is legitimately nested deeper than a few levels
MAX_REQUEST_BYTES = 16 * 1024 * 1024  # one JSON-RPC line; the largest text argument is 1 MiB


def depth_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when `value` (JSON-like: dicts, lists, scalars) nests deeper than `limit` containers."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth + 1 > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list | tuple))
    return False


def depth_message(limit: int = MAX_DEPTH) -> str:
    return f"arguments are nested deeper than {limit} levels; send flatter values"

# One content limit for every long free-text argument (memories, messages, diary, briefings,
# components, fix patterns): 1 MiB of UTF-8. Messaging used 1,000,000 until #18.
MAX_CONTENT_BYTES = 1_048_576

_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")
_BRACKET_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def raw_json_depth_exceeds(raw: bytes, limit: int = MAX_DEPTH) -> bool:
    """True when JSON text nests deeper than `limit` containers, decided on the bytes *before* parsing
    (a 100,000-deep body makes `json.loads` raise RecursionError after a lot of work). Strings are
    removed first, so brackets inside them do not count; invalid JSON is left to the parser."""
    brackets = _NOT_BRACKET.sub(b"", _JSON_STRING.sub(b"", raw))
    return any(d > limit for d in itertools.accumulate(_BRACKET_STEP[b] for b in brackets))
