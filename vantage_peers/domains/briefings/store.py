"""Briefing notes. SQL only; each public function runs inside the caller's db.read / db.write."""

from __future__ import annotations

from typing import Any

from ...core import parties
from ...core.errors import NotFound
from ...core.ids import now_ms
from ...core.rbac import require_party
from ...db import Connection
from ...db.table import Table
from ...search.fts import fts_query
from ...search.keyword import keyword_docs

NOTES = Table(
    name="briefingNotes", prefix="brf", label="briefing note",
    json_cols=("participants", "decisions", "linkedMemoryIds"),
    lite_keys=("_id", "_creationTime", "topic", "title", "participants", "createdBy"),
)
FULL_DEFAULT_LIMIT = 15  # the backend auto-limits fields=full pages to 15 when no limit is given
MUTABLE = ("title", "topic", "participants", "content", "decisions", "linkedMemoryIds")


def check_memories(conn: Connection, memory_ids: list[str] | None) -> list[str] | None:
    """Refuse ids that are not rows of `memories` (NOT_FOUND naming them); returns the deduplicated list."""
    if memory_ids is None:
        return None
    unique = list(dict.fromkeys(memory_ids))
    found: set[str] = set()
    for start in range(0, len(unique), 500):
        chunk = unique[start : start + 500]
        marks = ",".join("?" for _ in chunk)
        found.update(r["id"] for r in conn.query(f"SELECT id FROM memories WHERE id IN ({marks})", chunk))
    missing = [m for m in unique if m not in found]
    if missing:
        shown = ", ".join(missing[:10]) + (f" (+{len(missing) - 10} more)" if len(missing) > 10 else "")
        raise NotFound(f"linkedMemoryIds: no memory with id {shown}; store the memory first or drop the id")
    return unique


def create_note(conn: Connection, *, values: dict[str, Any]) -> str:
    values = {**values, "linkedMemoryIds": check_memories(conn, values.get("linkedMemoryIds"))}
    return NOTES.insert(conn, values)


def update_note(conn: Connection, *, note_id: str, caller: str, changes: dict[str, Any]) -> None:
    row = NOTES.require(conn, note_id)
    require_party(caller, parties.names("briefing note", row, "change"), action=f"update briefing note {note_id}",
                  role="its creator")
    if "linkedMemoryIds" in changes:
        changes = {**changes, "linkedMemoryIds": check_memories(conn, changes["linkedMemoryIds"])}
    NOTES.patch(conn, note_id, {**changes, "updatedBy": caller}, now=now_ms())


def delete_note(conn: Connection, *, note_id: str, caller: str) -> dict[str, bool]:
    row = NOTES.row(conn, note_id)
    if row is None:
        return {"deleted": False}
    require_party(caller, parties.names("briefing note", row, "force"), action=f"delete briefing note {note_id}",
                  role="its creator")
    return {"deleted": NOTES.delete(conn, note_id)}


def list_notes(
    conn: Connection, *, topic: str | None, updated_since: int | None, limit: int | None,
    cursor: str | None, fields: str,
) -> dict[str, Any]:
    where, params = [], []
    if updated_since is not None:
        where.append("updatedAt >= ?")
        params.append(updated_since)
    default = FULL_DEFAULT_LIMIT if fields == "full" else 20
    return NOTES.page(
        conn, filters={"topic": topic}, where=where, params=params, limit=limit, default_limit=default,
        cursor=cursor, fields=fields,
    )


def search_notes(conn: Connection, *, query: str, topic: str | None, limit: int) -> list[dict[str, Any]]:
    match = fts_query(query)
    if match is None:
        return []
    where, params = [], []
    if topic is not None:
        where.append("d.topic = ?")
        params.append(topic)
    return keyword_docs(conn, fts="briefingNotes_fts", table=NOTES.name, match=match, where=where, params=params,
                        limit=limit, snippet="content", shape=NOTES.doc)
