"""What a namespace's bundle holds, and reading it out of the database.

A namespace NS owns (docs/bundles.md "What a bundle contains"):
- memories: every memory whose `namespace` is exactly NS — episodes included (they are memories
  of type `episode`), superseded and soft-deleted ones included (relations and history survive),
  expired ones excluded;
- briefing notes: those whose `topic` is one of NS's keys, or that link (`linkedMemoryIds`) at
  least one of those memories;
- tasks (with their work segments): those whose `project` is one of NS's keys.
NS's keys are NS itself and, for `project/<name>`, also `<name>`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...core.ids import now_ms
from ...db import Connection, Row, loads

PROJECT_PREFIX = "project/"
MEMORY_COLS = ("id", "type", "content", "createdBy", "relations", "isLatest", "supersededBy", "deletedAt", "ttl",
               "expiresAt", "episode", "createdAt", "updatedAt")
BRIEFING_COLS = ("id", "title", "topic", "participants", "content", "decisions", "linkedMemoryIds", "createdBy",
                 "updatedBy", "createdAt", "updatedAt")
TASK_COLS = ("id", "title", "description", "project", "tags", "assignedTo", "assignedToInstance", "priority",
             "status", "dependsOn", "missionId", "estimatedMinutes", "actualMinutes", "durationSource", "startedAt",
             "completedAt", "dueDate", "completionNote", "blockedBy", "cancelReason", "paused", "pausedAt",
             "createdBy", "createdAt", "updatedAt")
SEGMENT_COLS = ("id", "orchestrator", "startedAt", "endedAt", "createdAt")
JSON_COLS = {"relations", "episode", "participants", "decisions", "linkedMemoryIds", "tags", "dependsOn"}
BOOL_COLS = {"isLatest", "paused"}


def keys(namespace: str) -> list[str]:
    """The values of `topic` / `project` that belong to a namespace."""
    out = [namespace]
    if namespace.startswith(PROJECT_PREFIX) and len(namespace) > len(PROJECT_PREFIX):
        out.append(namespace[len(PROJECT_PREFIX):])
    return out


def rebase(value: str | None, source: str, target: str) -> str | None:
    """A topic/project that named the source namespace, renamed for the target one."""
    if value is None:
        return None
    if value == source:
        return target
    src_keys, dst_keys = keys(source), keys(target)
    if len(src_keys) == 2 and value == src_keys[1]:
        return dst_keys[1] if len(dst_keys) == 2 else target
    return value


def _record(row: Row, cols: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for col in cols:
        value = row.get(col)
        if value is None:
            continue
        if col in JSON_COLS:
            value = loads(value)
        elif col in BOOL_COLS:
            value = bool(value)
        out[col] = value
    return out


def _select(cols: tuple[str, ...], alias: str = "") -> str:
    return ", ".join(f"{alias}{c}" for c in cols)


def memory_rows(conn: Connection, namespace: str, *, now: int, live_only: bool = True) -> Iterator[Row]:
    live = " AND (expiresAt IS NULL OR expiresAt > ?)" if live_only else ""
    params: tuple[Any, ...] = (namespace, now) if live_only else (namespace,)
    # Streamed from the cursor (not fetched as a list): a namespace may hold millions of memories.
    rows = conn.iterate(f"SELECT {_select(MEMORY_COLS)} FROM memories WHERE namespace = ?{live} "
                        "ORDER BY createdAt, id", params)
    for row in rows:
        yield dict(zip(MEMORY_COLS, row.values(), strict=True))


# The linked-memory test looks each id up by primary key (a join would let SQLite scan the
# namespace's memories once per note).
BRIEFING_WHERE = ("(b.topic IN ({marks}) OR (b.linkedMemoryIds IS NOT NULL AND EXISTS (SELECT 1 FROM "
                  "json_each(b.linkedMemoryIds) j WHERE (SELECT m.namespace FROM memories m WHERE m.id = j.value) = ?)))")


def briefing_rows(conn: Connection, namespace: str) -> list[Row]:
    ks = keys(namespace)
    where = BRIEFING_WHERE.format(marks=",".join("?" for _ in ks))
    return conn.query(f"SELECT {_select(BRIEFING_COLS, 'b.')} FROM briefingNotes b WHERE {where} "
                      "ORDER BY b.createdAt, b.id", (*ks, namespace))


def task_rows(conn: Connection, namespace: str) -> list[Row]:
    ks = keys(namespace)
    return conn.query(f"SELECT {_select(TASK_COLS)} FROM tasks WHERE project IN ({','.join('?' for _ in ks)}) "
                      "ORDER BY createdAt, id", ks)


def memory_records(conn: Connection, namespace: str, now: int | None = None) -> Iterator[dict[str, Any]]:
    for row in memory_rows(conn, namespace, now=now if now is not None else now_ms()):
        yield _record(row, MEMORY_COLS)


def briefing_records(conn: Connection, namespace: str) -> Iterator[dict[str, Any]]:
    for row in briefing_rows(conn, namespace):
        yield _record(row, BRIEFING_COLS)


def task_records(conn: Connection, namespace: str) -> Iterator[dict[str, Any]]:
    for row in task_rows(conn, namespace):
        record = _record(row, TASK_COLS)
        segments = conn.query(f"SELECT {_select(SEGMENT_COLS)} FROM taskSegments WHERE taskId = ? "
                              "ORDER BY startedAt, id", (row["id"],))
        if segments:
            record["segments"] = [_record(s, SEGMENT_COLS) for s in segments]
        yield record


def members(conn: Connection, namespace: str, now: int) -> dict[str, Iterator[dict[str, Any]]]:
    """Member name -> record generator (consume inside one read transaction for a consistent bundle)."""
    return {
        "memories.jsonl": memory_records(conn, namespace, now),
        "briefings.jsonl": briefing_records(conn, namespace),
        "tasks.jsonl": task_records(conn, namespace),
    }
