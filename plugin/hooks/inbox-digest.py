#!/usr/bin/env python3
"""inbox-digest (SessionStart, UserPromptSubmit): put new messages and tasks for this agent in context.

Runs `vantage-peers wait --timeout 0` (a single check) for VP_ORCHESTRATOR and, when something is
new for this session, answers `hookSpecificOutput.additionalContext` with the ≤ 1 KB digest. A
user prompt also stands down the background Stop waiter of the previous turn (the session is
active again; this hook reports what arrived). Fails open; `VP_WAKE_HOOKS=off` disables it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    try:
        import _vp_wake as wake

        wake.arm_budget(10)  # the whole hook: a single check of the database
        event = wake.read_event()
        if not wake.enabled():
            return 0
        name = event.get("hook_event_name")
        if name not in ("SessionStart", "UserPromptSubmit"):
            return 0
        if name == "SessionStart" and event.get("source") in ("clear", "compact"):
            # The context was emptied or summarised: what was reported before is no longer in it.
            with contextlib.suppress(OSError):
                os.remove(wake.state_path(event))
        with open(wake.state_path(event, "sleeper"), "w", encoding="utf-8") as f:
            f.write(uuid.uuid4().hex)  # a Stop waiter still sleeping sees it is superseded and exits quietly
        text = wake.run_wait(event, 0, wake.seconds("VP_HOOK_TIMEOUT_SECONDS", 8))
        if text:
            sys.stdout.write(json.dumps({"hookSpecificOutput": {"hookEventName": name, "additionalContext": text}},
                                        ensure_ascii=False))
            sys.stdout.flush()
    except Exception:  # noqa: BLE001 - fail open: never block a session start or a prompt
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
