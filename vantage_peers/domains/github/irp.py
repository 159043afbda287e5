"""The Issue Resolution Protocol flow (spec §16, §6 rules 3-4): the mission and comments an issue starts.

- An issue opened on a mapped repo creates a mission from the default template for the mapped
  orchestrator (tasks titled `[#NNN] TN — <step>`) and queues "Investigating - assigned to …".
- Completing a task titled `#NNN` in a mapped project links it to the issue; a title
  `[#NNN] TN — <step>` with N in 6, 8, 11 queues the documented comment. Comments end with the
  orchestrator signature line and are sent by the outbox job, never inside the tool call.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ...core.ids import now_ms
from ...core.rbac import SYSTEM
from ...db import Connection, Row, loads
from ..missions import store as missions
from ..templates import store as templates
from . import issues, outbox
from .common import utc_minute

STEP_TITLE = re.compile(r"^\s*\[#(\d{1,9})\]\s*T(\d{1,2})\s*[—–-]+\s*\S")
COMMENTS = {
    0: "Investigating - assigned to {orchestrator}",
    6: "Bug reproduced in test suite. Root cause identified.",
    8: "Fix ready. All tests pass including new regression test.",
    11: "Fixed and deployed to production. Regression test added.",
}
# /docs/infrastructure/signatures: the team suffix per orchestrator.
TEAM_ROLES = {"pi": "Lead", "sigma": "Infra", "omega": "Dev", "tau": "Frontend", "phi": "Product", "zeta": "Dev"}
def signature(conn: Connection, orchestrator: str, now: int) -> str:
    """`Orchestrator: Sigma — VantageOS Team Infra | 2026-04-06 14:32` (UTC)."""
    role = TEAM_ROLES.get(orchestrator.lower())
    if role is None:
        row = conn.one("SELECT static FROM profiles WHERE orchestratorId = ?", (orchestrator,))
        static = loads(row["static"]) if row and row["static"] else {}
        role = (static.get("role") or "").strip().title() or None if isinstance(static, dict) else None
    team = f"VantageOS Team {role}" if role else "VantageOS Team"
    return f"Orchestrator: {orchestrator[:1].upper()}{orchestrator[1:]} — {team} | {utc_minute(now)}"


def queue_comment(conn: Connection, *, repo: str, number: int, step: int, orchestrator: str, now: int) -> str | None:
    """Queue the step's comment once per issue (dedup key `irp:<repo>#<n>:T<step>`)."""
    text = COMMENTS[step].format(orchestrator=orchestrator)
    body = f"{text}\n\n{{marker}}\n{signature(conn, orchestrator, now)}"
    return outbox.queue(conn, kind="comment", dedup_key=f"irp:{repo.lower()}#{number}:T{step}", repo=repo,
                        issue_number=number, payload={"body": body, "step": step}, now=now)


def default_template(conn: Connection) -> Row | None:
    return conn.one("SELECT * FROM missionTemplates WHERE isDefault = 1 ORDER BY updatedAt DESC LIMIT 1")


def start_irp(conn: Connection, *, issue: Row, mapping: Row, now: int) -> dict[str, Any]:
    """Mission + IRP tasks + the acknowledge comment, once per issue (missionId set only if still NULL)."""
    number, repo, orchestrator = issue["issueNumber"], issue["repo"], mapping["orchestrator"]
    comment = queue_comment(conn, repo=repo, number=number, step=0, orchestrator=orchestrator, now=now)
    if issue["missionId"]:
        return {"missionId": issue["missionId"], "commentQueued": comment is not None, "taskIds": []}
    tpl = default_template(conn)
    title = (issue["title"] or "").strip()
    mission_id = missions.create_mission(conn, fields={
        "name": f"IRP {repo}#{number}" + (f": {title[:150]}" if title else ""),
        "description": f"Issue Resolution Protocol for {issue['htmlUrl'] or f'{repo}#{number}'}",
        "project": mapping["project"], "status": "execute", "priority": "high", "pilot": orchestrator,
        "agents": [orchestrator], "brief": (issue["body"] or "")[:4000] or None,
        "templateId": tpl["name"] if tpl else None, "createdBy": SYSTEM,
    }, now=now)
    claimed = conn.execute("UPDATE issues SET missionId = ?, updatedAt = ? WHERE id = ? AND missionId IS NULL",
                           (mission_id, now, issue["id"]))
    if not claimed:  # another delivery attached a mission first within this lock: drop ours
        conn.execute("DELETE FROM missions WHERE id = ?", (mission_id,))
        return {"missionId": issues.require(conn, repo, number)["missionId"], "commentQueued": comment is not None,
                "taskIds": []}
    task_ids: list[str] = []
    if tpl is not None:
        context = {"repo": repo, "issueNumber": str(number), "title": title, "orchestrator": orchestrator,
                   "project": mapping["project"]}
        made = templates.instantiate(conn, template_name=tpl["name"], mission_id=mission_id, context=context,
                                     title_prefix=None, caller=SYSTEM, now=now)
        task_ids = made["taskIds"]
        for step, task_id in enumerate(task_ids):  # `[#NNN] TN — <step>` drives the numbered comments
            conn.execute("UPDATE tasks SET title = ? || title WHERE id = ?", (f"[#{number}] T{step} — ", task_id))
    return {"missionId": mission_id, "commentQueued": comment is not None, "taskIds": task_ids}


def on_task_completed(conn: Connection, task: dict[str, Any], numbers: list[int], mapping: dict[str, Any], *,
                      wake: Callable[[str], None] | None = None) -> None:
    """The `issue_links` seam: runs inside complete_task's transaction (nothing is sent from here).

    `wake` is the completing App's `app.wake`: its scheduler sends a queued comment soon (a hint;
    without it the comment goes out on the next tick).
    """
    now = now_ms()
    repo = mapping["repo"]
    for number in numbers:
        issue, _ = issues.ensure(conn, repo=repo, number=number, mapping=mapping, now=now)
        issues.link_task(conn, issue=issue, task=task, now=now)
    m = STEP_TITLE.match(task.get("title") or "")
    if m and int(m.group(1)) in numbers and int(m.group(2)) in (6, 8, 11):
        step = int(m.group(2))
        queued = queue_comment(conn, repo=repo, number=int(m.group(1)), step=step,
                               orchestrator=mapping["orchestrator"], now=now)
        if queued and wake is not None:
            wake("github.outbox")  # debounced by the scheduler, so this transaction commits first
        shas = issues.SHA.findall(task.get("completionNote") or "")
        if step == 11 and shas:  # "Fixed and deployed to production": the mapping's last deployed commit
            conn.execute("UPDATE githubRepoMapping SET lastDeployedSHA = ?, lastDeployedAt = ?, updatedAt = ? "
                         "WHERE id = ?", (shas[-1], now, now, mapping["id"]))

