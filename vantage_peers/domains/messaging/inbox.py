"""What is waiting for one agent: unread (or redelivered) messages and tasks to pick up.

Shared by `vantage-peers wait` (wake.py), the plugin hooks (through it) and the MCP inbox /
task-queue resources (tools_resources.py). Each item carries a `key` that changes when the item
becomes new again: `rcp:<receipt>:<deliveryAttempt>` (a redelivery is new) and `task:<id>` while
the task is `todo` (assigned, or back from blocked).
"""

from __future__ import annotations

from typing import Any

from ...db import Database

DIGEST_MAX_BYTES = 1024
SCAN_LIMIT = 200  # pending items read per kind; the digest shows far fewer
KINDS = ("messages", "tasks")
PREFIX = {"messages": "rcp:", "tasks": "task:"}
OPEN_TASK_STATUSES = ("todo", "in_progress", "review", "blocked")


def pending(db: Database, *, who: str, instance: str | None, kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    """What is waiting for `who` right now, oldest first, each with its `key`."""

    def read(c) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if "messages" in kinds:
            inst = "AND (r.recipientInstanceId IS NULL OR r.recipientInstanceId = ?) " if instance else ""
            for r in c.query(
                "SELECT r.id, r.messageId, r.deliveryAttempt, r.ackRequired, m.sender, m.content, r.createdAt "
                "FROM messageReceipts r INDEXED BY receipts_unread JOIN messages m ON m.id = r.messageId "
                f"WHERE r.recipient = ? AND r.readAt IS NULL {inst}ORDER BY r.createdAt, r.id LIMIT ?",
                (who, instance, SCAN_LIMIT) if instance else (who, SCAN_LIMIT),
            ):
                out.append({"kind": "message", "key": f"rcp:{r['id']}:{r['deliveryAttempt']}", "receiptId": r["id"],
                            "messageId": r["messageId"], "from": r["sender"], "text": r["content"],
                            "ackRequired": bool(r["ackRequired"]), "deliveryAttempt": r["deliveryAttempt"]})
        if "tasks" in kinds:
            inst = "AND (assignedToInstance IS NULL OR assignedToInstance = ?) " if instance else ""
            for t in c.query(
                "SELECT id, title, priority, createdBy FROM tasks WHERE assignedTo = ? AND status = 'todo' "
                f"{inst}ORDER BY updatedAt, id LIMIT ?",
                (who, instance, SCAN_LIMIT) if instance else (who, SCAN_LIMIT),
            ):
                out.append({"kind": "task", "key": f"task:{t['id']}", "taskId": t["id"], "from": t["createdBy"],
                            "text": t["title"], "priority": t["priority"]})
        return out

    return db.read(read)


def digest(items: list[dict[str, Any]], who: str) -> str:
    """At most DIGEST_MAX_BYTES of UTF-8: who sent what, with the ids to act on."""
    msgs = sum(1 for i in items if i["kind"] == "message")
    tasks = len(items) - msgs
    lines = [f"vantage-peers: {msgs} new message(s), {tasks} task(s) for {who}."]
    for i in items:
        text = " ".join(str(i["text"] or "").split())
        text = text[:100] + ("…" if len(text) > 100 else "")
        if i["kind"] == "message":
            ack = f", ack required (attempt {i['deliveryAttempt']})" if i["ackRequired"] else ""
            lines.append(f"- message {i['messageId']} (receipt {i['receiptId']}) from {i['from']}{ack}: {text}")
        else:
            lines.append(f"- task {i['taskId']} [{i['priority']}] from {i['from'] or '?'}: {text}")
    tail = "Read with check_messages (acknowledge_message when asked) and list_tasks."
    out = lines[0]
    for n, line in enumerate(lines[1:], 1):
        more = f"\n… and {len(lines) - n} more"
        if len((out + "\n" + line + more + "\n" + tail).encode()) > DIGEST_MAX_BYTES:
            out += more
            break
        out += "\n" + line
    out += "\n" + tail
    return out.encode()[:DIGEST_MAX_BYTES].decode("utf-8", "ignore")


def task_queue(db: Database, *, who: str, limit: int = 100) -> list[dict[str, Any]]:
    """Open tasks assigned to `who`, most recently changed first (the `vp://tasks/{orchestrator}` resource)."""
    marks = ",".join("?" * len(OPEN_TASK_STATUSES))
    return db.read(lambda c: c.query(
        "SELECT id, title, status, priority, assignedToInstance, createdBy, updatedAt FROM tasks "
        f"WHERE assignedTo = ? AND status IN ({marks}) ORDER BY updatedAt DESC, id DESC LIMIT ?",
        (who, *OPEN_TASK_STATUSES, limit)))
