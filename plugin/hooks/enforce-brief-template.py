#!/usr/bin/env python3
"""enforce-brief-template (PreToolUse: Task / Agent, Claude Code's subagent dispatch tool).

Every subagent brief must carry a `Template reference: <path>` line (at the top) naming the brief
template it was derived from.
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

HOOK = "enforce-brief-template"
DISPATCH_TOOLS = {"Task", "Agent"}  # Claude Code renamed Task to Agent (v2.1.63); both are matched
MARKER = re.compile(r"^[ \t>*_-]*Template reference:[ \t*_]*\S", re.M)


def check(event: dict) -> Block | None:
    if tool_name(event) not in DISPATCH_TOOLS:
        return None
    prompt = tool_input(event).get("prompt")
    if isinstance(prompt, str) and MARKER.search(prompt):
        return None
    return Block(HOOK, "the subagent brief (prompt) has no 'Template reference:' line.",
                 "add one line at the top of the prompt naming the brief template you derived it from, e.g.\n"
                 "Template reference: resources/templates/brief-backend.md\n"
                 "When no template applies, reference resources/templates/agent-brief-template.md (the generic "
                 "fallback) and adapt the brief: FILES / EXACT CHANGES / ACCEPTANCE CRITERIA.")


if __name__ == "__main__":
    sys.exit(main(check))
