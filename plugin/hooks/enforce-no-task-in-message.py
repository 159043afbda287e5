#!/usr/bin/env python3
"""enforce-no-task-in-message (PreToolUse: send_message).

A message that gives an imperative instruction ("implement", "fix", "build", "deploy", "create",
"update") must reference a task id: the work lives in a task, messages coordinate.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import re

    from _vp_hook import Block, main, tool_input, tool_name
except Exception:  # noqa: BLE001 - fail open
    sys.exit(0)

HOOK = "enforce-no-task-in-message"
IMPERATIVES = ("implement", "fix", "build", "deploy", "create", "update")
IMPERATIVE = re.compile(r"\b(" + "|".join(IMPERATIVES) + r")\b", re.I)
TASK_REFERENCES = (
    re.compile(r"\btsk_[0-9A-Za-z]{6,}\b"),  # a vantage-peers task id
    # "Task k170xxx", "task id: 42abc", "tâche #T6-12": the word task followed by an id with a digit
    re.compile(r"\b(?:task|t[aâ]che)(?:\s*id)?\s*[:#=]?\s*[`'\"]?(?=[\w-]*\d)[A-Za-z0-9][\w-]{2,}", re.I),
    re.compile(r"\btaskIds?\b\s*[:=]\s*\S", re.I),
    re.compile(r"\bk[0-9a-z]{15,}\b"),  # a Convex task document id
)


def check(event: dict) -> Block | None:
    if tool_name(event) != "send_message":
        return None
    content = tool_input(event).get("content")
    if not isinstance(content, str):
        return None
    content = content[:200_000]  # longer messages are judged on their first 200,000 characters
    verbs = sorted({m.group(1).lower() for m in IMPERATIVE.finditer(content)})
    if not verbs or any(p.search(content) for p in TASK_REFERENCES):
        return None
    return Block(
        HOOK, f"imperative instruction without a task reference ({', '.join(repr(v) for v in verbs)}).",
        "create the work as a task first (create_task, with VERIFICATION: and TESTS: sections), then send "
        "a message that points at its id, e.g. 'Task tsk_... is ready for you - #546 is open.'")


if __name__ == "__main__":
    sys.exit(main(check))
