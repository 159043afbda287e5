"""Work an idle worker may take: the claimable tasks of one orchestrator as wake items.

Shared by `vantage-peers wait --for work` (wake.py) and the `vp://tasks/{orchestrator}` resource
(its `claimable` list, so a task subscription wakes for claimable work too). An item's key is
`work:<task id>` while the task is claimable: a task taken by someone else drops out, and comes back
as new when its claim lapses — which is exactly when an idle worker should wake.
"""

from __future__ import annotations

from typing import Any

from ...db import Database
from ...ids import now_ms
from . import eligibility

PREFIX = "work:"


def pending_work(db: Database, *, who: str, instance: str | None, limit: int = 200) -> list[dict[str, Any]]:
    """Claimable tasks of `who`, oldest change first, as wake items (`kind: work`)."""
    now = now_ms()
    rows = db.read(lambda c: eligibility.claimable(c, who=who, instance=instance, now=now))[:limit]
    return [{"kind": "work", "key": f"{PREFIX}{r['id']}", "taskId": r["id"], "from": r["createdBy"],
             "text": r["title"], "priority": r["priority"], "pool": r["pool"],
             "lapsed": r["lapsedAt"] is not None} for r in rows]
