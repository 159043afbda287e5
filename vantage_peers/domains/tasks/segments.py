"""Work segments: one row per stretch of real work on a task (`startedAt`, `endedAt`).

The billed duration of a task is the sum of its segments, so idle time between a pause and a
resume is never counted. A unique partial index keeps at most one open segment per task, even
across processes.
"""

from __future__ import annotations

from typing import Any

from ...core.ids import new_id
from ...db import Connection, Row


def open_row(conn: Connection, *, task_id: str) -> Row | None:
    return conn.one("SELECT * FROM taskSegments WHERE taskId = ? AND endedAt IS NULL", (task_id,))


def open_segment(conn: Connection, *, task_id: str, who: str | None, now: int) -> None:
    conn.execute(
        "INSERT INTO taskSegments (id, taskId, orchestrator, startedAt, createdAt) VALUES (?, ?, ?, ?, ?)",
        (new_id("seg"), task_id, who, now, now),
    )


def close_segment(conn: Connection, *, task_id: str, now: int) -> int:
    """Close the open segment (if any) at `now`; returns 1 when one was closed."""
    return conn.execute(
        "UPDATE taskSegments SET endedAt = max(?, startedAt) WHERE taskId = ? AND endedAt IS NULL", (now, task_id)
    )


def worked_ms(conn: Connection, *, task_id: str) -> tuple[int, int]:
    """(total closed milliseconds, number of segments)."""
    row = conn.one(
        "SELECT coalesce(sum(endedAt - startedAt), 0) AS total, count(*) AS n FROM taskSegments "
        "WHERE taskId = ? AND endedAt IS NOT NULL",
        (task_id,),
    )
    return int(row["total"]), int(row["n"])


def list_segments(conn: Connection, *, task_id: str) -> list[dict[str, Any]]:
    out = []
    for seg in conn.query(
        "SELECT orchestrator, startedAt, endedAt FROM taskSegments WHERE taskId = ? ORDER BY startedAt, seq",
        (task_id,),
    ):
        item: dict[str, Any] = {"startedAt": seg["startedAt"]}
        if seg["endedAt"] is not None:
            item["endedAt"] = seg["endedAt"]
            item["minutes"] = round((seg["endedAt"] - seg["startedAt"]) / 60_000, 2)
        if seg["orchestrator"]:
            item["orchestrator"] = seg["orchestrator"]
        out.append(item)
    return out


def running_task_of(conn: Connection, *, orchestrator: str, other_than: str) -> Row | None:
    """Another in_progress task assigned to `orchestrator` with an open segment, if any."""
    return conn.one(
        "SELECT t.id, t.title FROM tasks t JOIN taskSegments s ON s.taskId = t.id AND s.endedAt IS NULL "
        "WHERE t.assignedTo = ? AND t.status = 'in_progress' AND t.id != ? LIMIT 1",
        (orchestrator, other_than),
    )
