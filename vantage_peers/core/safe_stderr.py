"""stderr that never raises into a call (issue #19).

When stderr is a file on the disk that just filled up (or a closed pipe), a traceback or warning
written there raised `OSError` out of the error handler itself, and the agent got a bare
"Error executing tool X" with no code. `install()` wraps `sys.stderr` once so that a failed write is
dropped instead; entry points call it first thing.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any


class SafeStream:
    """Forwards to `inner`; write/flush failures are swallowed (what is lost is only a log line)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        try:
            return self._inner.write(text)
        except (OSError, ValueError):  # ENOSPC, EPIPE, EIO; ValueError: the stream was closed
            return len(text)

    def flush(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def install() -> None:
    if sys.stderr is not None and not isinstance(sys.stderr, SafeStream):
        sys.stderr = SafeStream(sys.stderr)  # type: ignore[assignment]
