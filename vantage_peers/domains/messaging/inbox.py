"""What is waiting for one agent: unread (or redelivered) messages and tasks to pick up.

Shared by `vantage-peers wait` (wake.py), the plugin hooks (through it) and the MCP inbox /
task-queue resources (tools_resources.py). Each item carries a `key` that changes when the item
becomes new again: `rcp:<receipt>:<deliveryAttempt>` (a redelivery is new) and `task:<id>` while
the task is `todo` (assigned, or back from blocked).

The kinds are a table (`Kind`, `REGISTRY`): `--for`, the key prefixes `wait` forgets by, the
queries and the digest all come from it. A new kind is a reader, a digest line and one
`Kind(...)` entry; the tasks domain registers `work` (tasks the agent may claim, keys `work:<id>`)
with `register`, from `domains/tasks/queue.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...db import Connection, Database

DIGEST_MAX_BYTES = 1024
SCAN_LIMIT = 200  # pending items read per kind; the digest shows far fewer
OPEN_TASK_STATUSES = ("todo", "in_progress", "review", "blocked")

Item = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    """One kind of thing an agent waits for."""

    name: str  # the `--for` word: messages, tasks
    prefix: str  # every item key of this kind starts with it (`wait` forgets keys by prefix)
    item: str  # the item's `kind` field (JSON output): message, task
    count: str  # the digest header's counter, formatted with the number: "{} new message(s)"
    hint: str  # the tools that read it, for the digest's last line
    read: Callable[[Connection, str, str | None], list[Item]]  # (connection, who, instance) -> items, oldest first
    line: Callable[[Item], str]  # one digest line, `text` already shortened
    # Called before each read: brings due state up to date (a lapsed claim) and returns when the next
    # change that no commit announces is due (Unix ms), or None. The waiter wakes by then too.
    refresh: Callable[[Database], int | None] | None = None


def _read_messages(c: Connection, who: str, instance: str | None) -> list[Item]:
    inst = "AND (r.recipientInstanceId IS NULL OR r.recipientInstanceId = ?) " if instance else ""
    return [{"kind": "message", "key": f"rcp:{r['id']}:{r['deliveryAttempt']}", "receiptId": r["id"],
             "messageId": r["messageId"], "from": r["sender"], "text": r["content"],
             "ackRequired": bool(r["ackRequired"]), "deliveryAttempt": r["deliveryAttempt"]}
            for r in c.query(
                "SELECT r.id, r.messageId, r.deliveryAttempt, r.ackRequired, m.sender, m.content, r.createdAt "
                "FROM messageReceipts r INDEXED BY receipts_unread JOIN messages m ON m.id = r.messageId "
                f"WHERE r.recipient = ? AND r.readAt IS NULL {inst}ORDER BY r.createdAt, r.id LIMIT ?",
                (who, instance, SCAN_LIMIT) if instance else (who, SCAN_LIMIT))]


def _message_line(i: Item) -> str:
    ack = f", ack required (attempt {i['deliveryAttempt']})" if i["ackRequired"] else ""
    return f"message {i['messageId']} (receipt {i['receiptId']}) from {i['from']}{ack}: {i['text']}"


def _read_tasks(c: Connection, who: str, instance: str | None) -> list[Item]:
    inst = "AND (assignedToInstance IS NULL OR assignedToInstance = ?) " if instance else ""
    return [{"kind": "task", "key": f"task:{t['id']}", "taskId": t["id"], "from": t["createdBy"],
             "text": t["title"], "priority": t["priority"]}
            for t in c.query(
                "SELECT id, title, priority, createdBy FROM tasks WHERE assignedTo = ? AND status = 'todo' "
                f"{inst}ORDER BY updatedAt, id LIMIT ?",
                (who, instance, SCAN_LIMIT) if instance else (who, SCAN_LIMIT))]


def _task_line(i: Item) -> str:
    return f"task {i['taskId']} [{i['priority']}] from {i['from'] or '?'}: {i['text']}"


REGISTRY: dict[str, Kind] = {k.name: k for k in (
    Kind("messages", "rcp:", "message", "{} new message(s)", "check_messages (acknowledge_message when asked)",
         _read_messages, _message_line),
    Kind("tasks", "task:", "task", "{} task(s)", "list_tasks", _read_tasks, _task_line),
)}
KINDS = tuple(REGISTRY)  # `--for` accepts these
PREFIX = {k.name: k.prefix for k in REGISTRY.values()}


def register(kind: Kind) -> None:
    """Add a kind another domain reads (the tasks domain's `work`: tasks.queue), without messaging
    importing that domain."""
    global KINDS
    REGISTRY[kind.name] = kind
    KINDS = tuple(REGISTRY)
    PREFIX[kind.name] = kind.prefix


def pending(db: Database, *, who: str, instance: str | None, kinds: tuple[str, ...]) -> list[Item]:
    """What is waiting for `who` right now, kind by kind (in KINDS order), oldest first, each with its `key`."""
    chosen = [k for k in REGISTRY.values() if k.name in kinds]
    return db.read(lambda c: [item for k in chosen for item in k.read(c, who, instance)])


def digest(items: list[Item], who: str) -> str:
    """At most DIGEST_MAX_BYTES of UTF-8: who sent what, with the ids to act on."""
    by_item = {k.item: k for k in REGISTRY.values()}
    counts = ", ".join(k.count.format(sum(1 for i in items if i["kind"] == k.item)) for k in REGISTRY.values())
    lines = [f"vantage-peers: {counts} for {who}."]
    for i in items:
        text = " ".join(str(i["text"] or "").split())
        text = text[:100] + ("…" if len(text) > 100 else "")
        lines.append("- " + by_item[i["kind"]].line({**i, "text": text}))
    tail = f"Read with {' and '.join(k.hint for k in REGISTRY.values())}."
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
