#!/usr/bin/env python3
"""wake-on-message (Stop, `asyncRewake: true`): wake the idle session when a message or task arrives.

Claude Code runs this in the background when a turn ends. It blocks on `vantage-peers wait` (a
data_version watcher: near-zero CPU) in chunks of VP_WAKE_CHUNK_SECONDS, up to
VP_WAKE_TIMEOUT_SECONDS in all; when something new arrives it exits 2 with the digest on stderr,
which wakes the session with it. It exits 0 silently when nothing arrived, when a newer turn's
waiter (or a user prompt) superseded it, on any error (fail open), or with `VP_WAKE_HOOKS=off`.
Only things not yet reported to this session count, so its own wake-up never wakes it again.
"""

from __future__ import annotations

import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    try:
        import _vp_wake as wake

        event = wake.read_event()
        if not wake.enabled() or event.get("hook_event_name", "Stop") != "Stop":
            return 0
        token = uuid.uuid4().hex
        sleeper = wake.state_path(event, "sleeper")
        with open(sleeper, "w", encoding="utf-8") as f:
            f.write(token)  # the newest waiter of a session is the only one that may wake it

        def current() -> bool:
            try:
                with open(sleeper, encoding="utf-8") as f:
                    return f.read().strip() == token
            except OSError:
                return False

        total = wake.seconds("VP_WAKE_TIMEOUT_SECONDS", 3300)
        chunk = max(1.0, wake.seconds("VP_WAKE_CHUNK_SECONDS", 60))
        deadline = time.monotonic() + total
        while current():
            left = deadline - time.monotonic()
            if left <= 0:
                return 0
            step = min(chunk, left)
            text = wake.run_wait(event, step, step + 30)
            if text:
                sys.stderr.write(text + "\n")
                sys.stderr.flush()
                return 2
    except Exception:  # noqa: BLE001 - fail open
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
