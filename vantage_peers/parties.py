""""Caller is a party or `system`": the one rule the record domains share for who may change a record.

Foundation layer (imports only errors). Kept out of db/table.py, which is storage only.
"""

from __future__ import annotations

from collections.abc import Iterable

from .errors import Forbidden

SYSTEM = "system"


def require_party(caller: str, parties: Iterable[str | None], *, action: str, role: str) -> None:
    """Allow `caller` when it is one of `parties` or `system`; otherwise RBAC_DENIED naming who may."""
    allowed = list(dict.fromkeys(p for p in parties if p))  # a lead who is also the creator is named once
    if caller == SYSTEM or caller in allowed:
        return
    names = " or ".join(allowed + [SYSTEM])
    raise Forbidden(f"{action}: only {role} ({names}) may do this; callerOrchestrator is {caller}")
