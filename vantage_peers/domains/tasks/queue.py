"""Work an idle worker may take: the claimable tasks of one orchestrator as wake items.

Shared by `vantage-peers wait --for work` (wake.py) and the `vp://tasks/{orchestrator}` resource
(its `claimable` list, so a task subscription wakes for claimable work too). An item's key is
`work:<task id>` while the task is claimable: a task taken by someone else drops out, and comes back
as new when its claim lapses — which is exactly when an idle worker should wake.
"""

from __future__ import annotations

from typing import Any

from ...core.ids import now_ms
from ...db import Connection, Database
from ..leases import sweep
from ..messaging import inbox
from . import eligibility

PREFIX = "work:"


def pending_work(db: Database, *, who: str, instance: str | None) -> list[dict[str, Any]]:
    """Claimable tasks of `who`, oldest change first, as wake items (`kind: work`)."""
    return db.read(lambda c: _read_work(c, who, instance))


def _read_work(c: Connection, who: str, instance: str | None) -> list[dict[str, Any]]:
    rows = eligibility.claimable(c, who=who, instance=instance, now=now_ms())[:inbox.SCAN_LIMIT]
    return [{"kind": "work", "key": f"{PREFIX}{r['id']}", "taskId": r["id"], "from": r["createdBy"],
             "text": r["title"], "priority": r["priority"], "pool": r["pool"], "lapsed": r["lapsedAt"] is not None}
            for r in rows]


def _work_line(i: dict[str, Any]) -> str:
    how = ", its claim lapsed" if i["lapsed"] else ""
    pool = f" (pool {i['pool']})" if i["pool"] else ""
    return f"claimable task {i['taskId']} [{i['priority']}]{pool}{how} from {i['from'] or '?'}: {i['text']}"


def refresh(db: Database) -> int | None:
    """Before a waiter reads: expire the claims that lapsed (so their tasks are claimable now, even
    with no scheduler running), and say when the next claim in force lapses: no commit announces it."""
    now = now_ms()
    return sweep.read_after_expiry(db, now, lambda c: c.scalar(
        "SELECT min(expiresAt) FROM agentLeases WHERE kind = 'task' AND releasedAt IS NULL AND expiresAt > ?", (now,)))


inbox.register(inbox.Kind("work", PREFIX, "work", "{} claimable task(s)", "list_tasks claimable: true, then "
                          "checkout_task", _read_work, _work_line, refresh))
