#!/usr/bin/env python3
"""enforce-mission-template (PreToolUse: create_mission).

Every mission must reference a mission template through a non-empty `templateId`.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    from _vp_hook import Block, main, tool_input, tool_name
except Exception:  # noqa: BLE001 - fail open
    sys.exit(0)

HOOK = "enforce-mission-template"


def check(event: dict) -> Block | None:
    if tool_name(event) != "create_mission":
        return None
    template = tool_input(event).get("templateId")
    if isinstance(template, str) and template.strip():
        return None
    return Block(HOOK, "create_mission has no templateId; missions without a template drift from their outcome.",
                 "pick a mission template with list_mission_templates (get_mission_template shows its steps) and "
                 "pass it as templateId. For a genuinely freeform mission, create a template first with "
                 "update_mission_template, then reference it.")


if __name__ == "__main__":
    sys.exit(main(check))
