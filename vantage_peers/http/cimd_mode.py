"""`VP_CIMD=on|off|auto`: whether `serve` offers Client ID Metadata Documents (issue #31).

Claude Code and Codex sign in with CIMD when the authorization-server metadata says
`client_id_metadata_document_supported`: the server must then fetch the client's document from the
internet (claude.ai, chatgpt.com …). A server without outbound access cannot, and the sign-in fails.
- `on`: always offered;
- `off`: never offered and never fetched — clients register with DCR (`/oauth/register`), which
  needs no outbound connection;
- `auto` (default): offered until a document's host cannot be reached at all (it does not resolve,
  or no connection can be made — `cimd.CimdUnreachable`), then not offered for `QUIET_SECONDS`; a
  document fetched later turns it back on. No probe is ever sent: the server learns from the fetches
  clients ask for.
"""

from __future__ import annotations

import threading
import time
from typing import Any

MODES = ("on", "off", "auto")
QUIET_SECONDS = 3600.0


def mode_from_env(environ: Any) -> str:
    value = (environ.get("VP_CIMD") or "auto").strip().lower()
    if value not in MODES:
        raise ValueError(f"VP_CIMD must be on, off or auto, not {value!r}")
    return value


class CimdPolicy:
    def __init__(self, mode: str = "auto", *, clock: Any = time.monotonic) -> None:
        if mode not in MODES:
            raise ValueError(f"VP_CIMD must be on, off or auto, not {mode!r}")
        self.mode = mode
        self.clock = clock
        self._quiet_until = 0.0
        self._lock = threading.Lock()

    @property
    def fetches(self) -> bool:
        return self.mode != "off"

    def advertised(self) -> bool:
        if self.mode != "auto":
            return self.mode == "on"
        with self._lock:
            return self.clock() >= self._quiet_until

    def unreachable(self) -> None:
        """A document's host could not be reached: in `auto`, stop offering CIMD for a while."""
        with self._lock:
            self._quiet_until = self.clock() + QUIET_SECONDS

    def reached(self) -> None:
        with self._lock:
            self._quiet_until = 0.0
