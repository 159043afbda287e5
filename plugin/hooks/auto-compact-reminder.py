#!/usr/bin/env python3
"""auto-compact-reminder (PostToolUse: every tool; SessionStart resets the count, except on resume).

Counts tool calls per session (a small file in the temp directory keyed by a hash of the session
id) and reminds to run the pre-compact skill at 35 calls, then every 15 calls. Advisory only:
it never blocks. // allow-time-estimate: factual tool-call count thresholds
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import contextlib
    import hashlib
    import tempfile

    from _vp_hook import Notice, main
except Exception:  # noqa: BLE001 - fail open
    sys.exit(0)

FIRST, EVERY = 35, 15
REMINDER = "Context is growing — consider running the `pre-compact` skill before context window is full."


def counter_path(session_id: str) -> str:
    base = os.environ.get("VP_HOOK_STATE_DIR") or os.path.join(tempfile.gettempdir(), "vantage-peers-hooks")
    os.makedirs(base, exist_ok=True)
    digest = hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()[:32]
    return os.path.join(base, f"compact-{digest}.count")


def _locked_increment(path: str) -> int:
    """Add one to the counter under an exclusive lock (parallel tool calls fire hooks at once)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    with os.fdopen(fd, "r+") as f:
        try:
            import fcntl

            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        except ImportError:  # Windows: no flock; a lost increment only delays a reminder
            pass
        raw = f.read().strip()
        count = (int(raw) if raw.isdigit() else 0) + 1
        f.seek(0)
        f.truncate()
        f.write(str(count))
        return count


def due(count: int) -> bool:
    return count == FIRST or (count > FIRST and (count - FIRST) % EVERY == 0)


def check(event: dict) -> Notice | None:
    session = event.get("session_id")
    if not isinstance(session, str) or not session:
        return None
    path = counter_path(session)
    if event.get("hook_event_name") == "SessionStart":
        if event.get("source") == "resume":  # the same context comes back: keep counting
            return None
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        return None
    if event.get("hook_event_name") != "PostToolUse":
        return None
    count = _locked_increment(path)
    if not due(count):
        return None
    return Notice("PostToolUse", REMINDER, f"{REMINDER} ({count} tool calls in this session.)")


if __name__ == "__main__":
    sys.exit(main(check))
