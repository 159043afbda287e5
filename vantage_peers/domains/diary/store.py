"""Diary entries, keyed by (orchestrator, date). SQL only; callers wrap each call in db.read/db.write."""

from __future__ import annotations

from typing import Any

from ...core.envelope import fit_envelope
from ...core.ids import new_id, now_ms
from ...db import Connection, dumps
from ...db.table import Table

DIARY = Table(
    name="diary", prefix="dia", label="diary entry", json_cols=("highlights", "blockers"),
    lite_keys=("_id", "_creationTime", "date", "orchestrator"),
)
RANGE_DEFAULT_LIMIT = 200
RANGE_MAX_LIMIT = 1000


def write_diary(
    conn: Connection,
    *,
    date: str,
    orchestrator: str,
    content: str,
    highlights: list[str] | None = None,
    blockers: list[str] | None = None,
    instance_id: str | None = None,
) -> str:
    """Upsert decided inside SQL, so two processes writing the same day leave one row.

    The entry is overwritten (content, highlights, blockers); `createdAt` (= `_creationTime`)
    and the id stay those of the first write, `updatedAt` moves.
    """
    now = now_ms()
    return conn.scalar(
        "INSERT INTO diary (id, date, orchestrator, instanceId, content, highlights, blockers, createdAt, updatedAt) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (orchestrator, date) DO UPDATE SET content = excluded.content, "
        "highlights = excluded.highlights, blockers = excluded.blockers, "
        "instanceId = coalesce(excluded.instanceId, diary.instanceId), updatedAt = excluded.updatedAt "
        "RETURNING id",
        (new_id(DIARY.prefix), date, orchestrator, instance_id, content, dumps(highlights), dumps(blockers), now, now),
    )


def get_diary(conn: Connection, *, orchestrator: str, date: str) -> dict[str, Any] | None:
    row = conn.one("SELECT * FROM diary WHERE orchestrator = ? AND date = ?", (orchestrator, date))
    return DIARY.doc(row) if row else None


def _range(date_from: str | None, date_to: str | None) -> tuple[list[str], list[Any]]:
    where, params = [], []
    if date_from is not None:
        where.append("date >= ?")
        params.append(date_from)
    if date_to is not None:
        where.append("date <= ?")
        params.append(date_to)
    return where, params


def list_diaries(
    conn: Connection,
    *,
    orchestrator: str | None,
    date_from: str | None,
    date_to: str | None,
    limit: int | None,
    cursor: str | None,
    fields: str | None,
) -> dict[str, Any]:
    """Newest date first (ties: id), optional inclusive date range."""
    where, params = _range(date_from, date_to)
    return DIARY.page(
        conn, filters={"orchestrator": orchestrator}, where=where, params=params, sort_col="date",
        limit=limit, cursor=cursor, fields=fields,
    )


def list_by_date_range(
    conn: Connection, *, date_from: str, date_to: str, orchestrator: str | None, limit: int
) -> list[dict[str, Any]]:
    """Entries with from <= date <= to, ascending; the earliest `limit`, trimmed to the envelope cap."""
    where, params = _range(date_from, date_to)
    if orchestrator is not None:
        where.append("orchestrator = ?")
        params.append(orchestrator)
    rows = conn.query(
        f"SELECT * FROM diary WHERE {' AND '.join(where)} ORDER BY date ASC, orchestrator ASC, id ASC LIMIT ?",
        [*params, limit],
    )
    items = [DIARY.doc(r) for r in rows]
    return items[: fit_envelope(items)] if items else items
