#!/usr/bin/env python3
"""enforce-task-quality (PreToolUse: create_task) - the T-VERIFY doctrine.

Every new task's description must hold a `VERIFICATION:` section and a `TESTS:` section.
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

HOOK = "enforce-task-quality"
SECTIONS = {name: re.compile(r"\b" + name + r"[*_]*\s*:") for name in ("VERIFICATION", "TESTS")}
TEMPLATE = "VERIFICATION:\n- [ ] <observable result>\n- [ ] <observable result>\nTESTS:\n- [ ] <command or test>"


def check(event: dict) -> Block | None:
    if tool_name(event) != "create_task":
        return None
    description = tool_input(event).get("description")
    text = description if isinstance(description, str) else ""
    missing = [f"{name}:" for name, pattern in SECTIONS.items() if not pattern.search(text)]
    if not missing:
        return None
    what = "has no description" if not text.strip() else "lacks " + " and ".join(missing)
    return Block(HOOK, f"the task description {what} (T-VERIFY).",
                 "add both sections to the description, e.g.\n" + TEMPLATE)


if __name__ == "__main__":
    sys.exit(main(check))
