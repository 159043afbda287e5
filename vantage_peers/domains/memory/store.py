"""Memories: typed, namespaced text with relations, supersession, soft delete and TTL.

Reads never return an expired memory. Lists and searches skip archived (`isLatest=false`: superseded
by an `updates` relation or soft-deleted) rows unless `includeSuperseded` is asked for.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ...core.errors import InvalidArgument, NotFound
from ...core.ids import new_id, now_ms
from ...core.scopes import byte_range, sql_filter
from ...db import Connection, Row, dumps
from ...db.dialect import among
from ...db.paging import keyset_page, to_doc
from ...search.vectors import Scope
from .models import EPISODE_FIELDS

MAX_NAMESPACE_CHARS = 200
MAX_RELATIONS = 100
PREVIEW_CHARS = 160
MEMORY_LITE = ("_id", "_creationTime", "namespace", "type", "createdBy", "preview")
EPISODE_LITE = ("_id", "_creationTime", "namespace", "createdBy", "severity", "insight")
LIVE = "(expiresAt IS NULL OR expiresAt > ?)"


# -- namespaces -----------------------------------------------------------------------------------
def check_namespace(value: Any, field: str = "namespace") -> str:
    """A namespace to write: exact, case-sensitive, no surrounding spaces, no `*` (query syntax)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{field} must be a non-empty string such as 'global' or 'project/foo'")
    if value != value.strip():
        raise InvalidArgument(f"{field} must not start or end with whitespace (namespaces are exact)")
    if len(value) > MAX_NAMESPACE_CHARS:
        raise InvalidArgument(f"{field} is longer than {MAX_NAMESPACE_CHARS} characters")
    if "*" in value:
        raise InvalidArgument(f"{field} may not contain '*': it is reserved for prefix queries such as 'project/*'")
    if any(ord(ch) < 32 for ch in value):
        raise InvalidArgument(f"{field} may not contain control characters")
    return value


def scope_of(value: str | None, field: str = "namespace", *,
             visible: tuple[str, ...] | None = None) -> Scope | None:
    """The namespaces a query covers: None = all, `prefix/*` = everything under `prefix/`, else exact.

    `visible` is the caller's readable prefixes (a scoped HTTP token's): rows outside are never read.
    """
    if value is None or value == "" or value == "*":
        return None if visible is None else Scope("all", "", visible)
    if not isinstance(value, str) or len(value) > MAX_NAMESPACE_CHARS + 2:
        raise InvalidArgument(f"{field} must be a namespace, 'prefix/*' or omitted")
    if value.endswith("/*") and len(value) > 2:
        prefix = value[:-1]
        check_namespace(prefix, field)
        return Scope("prefix", prefix, visible)
    return Scope("exact", check_namespace(value, field), visible)


def scope_sql(scope: Scope | None, column: str = "namespace") -> tuple[list[str], list[Any]]:
    if scope is None or scope.kind == "all":
        where, params = [], []
    elif scope.kind == "exact":
        where, params = [f"{column} = ?"], [scope.value]
    else:
        low, high = scope.bounds()
        where, params = [byte_range(column)], [low, high]
    if scope is not None and scope.visible is not None:  # a scoped token sees only its read prefixes
        clause, args = sql_filter(scope.visible, column)
        where, params = [*where, clause], [*params, *args]
    return where, params


def rows_by_seq(conn: Connection, seqs: list[int], where: list[str], params: list[Any],
                columns: str = "m.*") -> list[Row]:
    """The memories of `seqs` that pass `where` (clauses on alias `m`). The seqs are looked up first
    (a MATERIALIZED CTE): without table statistics SQLite would otherwise walk a namespace's whole
    index and test each row against the list (6 ms for 30 seqs in a 100k-memory namespace)."""
    out: list[Row] = []
    for start in range(0, len(seqs), 900):  # SQLite's bound-parameter budget
        picked, keys = among(conn.backend, "seq", seqs[start:start + 900])
        out.extend(conn.query(
            f"WITH picked AS MATERIALIZED (SELECT * FROM memories WHERE {picked}) "
            f"SELECT {columns} FROM picked m WHERE {' AND '.join(where) or 'TRUE'}", [*keys, *params]))
    return out


# -- values ---------------------------------------------------------------------------------------
def parse_ttl(value: str, now: int) -> int:
    """An ISO 8601 datetime (UTC when it names no offset) as Unix ms; must lie in the future."""
    try:
        moment = datetime.fromisoformat(value.strip())
    except (ValueError, AttributeError):
        raise InvalidArgument("ttl must be an ISO 8601 datetime such as 2026-07-01T12:00:00Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    expires = int(moment.timestamp() * 1000)
    if expires <= now:
        raise InvalidArgument(f"ttl {value} is already in the past; give a future datetime or omit ttl")
    return expires


def render_episode(episode: dict[str, Any]) -> str:
    """The searchable text of an episode: every structured field, labelled."""
    lines = [f"{name.capitalize()}: {episode[name]}" for name in EPISODE_FIELDS if episode.get(name)]
    if episode.get("severity"):
        lines.append(f"Severity: {episode['severity']}")
    return "\n".join(lines)


def memory_doc(row: Row) -> dict[str, Any]:
    row = {k: v for k, v in row.items() if k != "nsKey"}
    return to_doc(row, json_cols=("relations", "episode"), bool_cols=("isLatest",))


def episode_doc(row: Row) -> dict[str, Any]:
    """An episode: the memory document with its structured fields lifted to the top level."""
    doc = memory_doc(row)
    episode = doc.pop("episode", None)
    if isinstance(episode, dict):
        for key, value in episode.items():
            if value is not None:
                doc[key] = value
    return doc


def with_preview(doc: dict[str, Any]) -> dict[str, Any]:
    content = doc.get("content", "")
    doc["preview"] = content if len(content) <= PREVIEW_CHARS else content[:PREVIEW_CHARS] + "…"
    return doc


# -- writes ---------------------------------------------------------------------------------------
def store_memory(
    conn: Connection,
    *,
    namespace: str,
    type: str,
    content: str,
    created_by: str,
    relations: list[dict[str, str]] | None = None,
    is_latest: bool = True,
    ttl: str | None = None,
    expires_at: int | None = None,
    episode: dict[str, Any] | None = None,
    now: int | None = None,
) -> dict[str, str]:
    """Insert one memory; an `updates` relation archives its target in this same transaction."""
    now = now if now is not None else now_ms()
    edges = list({(r["targetId"], r["type"]): r for r in relations or []}.values())
    if len(edges) > MAX_RELATIONS:
        raise InvalidArgument(f"relations holds more than {MAX_RELATIONS} entries")
    targets = sorted({e["targetId"] for e in edges})
    if targets:
        marks = ",".join("?" for _ in targets)
        found = {r["id"] for r in conn.query(
            f"SELECT id FROM memories WHERE id IN ({marks}) AND {LIVE}", [*targets, now])}
        missing = [t for t in targets if t not in found]
        if missing:
            raise NotFound(f"relations: target memory {missing[0]} does not exist (or has expired)")
    memory_id = new_id("mem")
    conn.execute(
        "INSERT INTO memories (id, namespace, type, content, createdBy, relations, isLatest, ttl, expiresAt, "
        "episode, createdAt, updatedAt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (memory_id, namespace, type, content, created_by, dumps(edges) if edges else None, int(is_latest),
         ttl, expires_at, dumps(episode), now, now),
    )
    archived = sorted({e["targetId"] for e in edges if e["type"] == "updates"})
    if archived:
        marks = ",".join("?" for _ in archived)
        conn.execute(
            f"UPDATE memories SET isLatest = 0, supersededBy = ?, updatedAt = ? WHERE id IN ({marks})",
            [memory_id, now, *archived],
        )
    return {"memoryId": memory_id}


def soft_delete(conn: Connection, *, memory_id: str, now: int | None = None) -> None:
    now = now if now is not None else now_ms()
    changed = conn.execute(
        f"UPDATE memories SET isLatest = 0, deletedAt = coalesce(deletedAt, ?), updatedAt = ? "
        f"WHERE id = ? AND {LIVE}",
        (now, now, memory_id, now),
    )
    if not changed:
        raise NotFound(f"memory {memory_id} does not exist (or has expired)")


def purge_expired(conn: Connection, *, now: int | None = None, batch: int = 500) -> int:
    """Hard-delete memories whose ttl has passed (their FTS rows, vectors and jobs go with them)."""
    now = now if now is not None else now_ms()
    return conn.execute(
        "DELETE FROM memories WHERE seq IN (SELECT seq FROM memories INDEXED BY memories_expiring "
        "WHERE expiresAt IS NOT NULL AND expiresAt <= ? LIMIT ?)",
        (now, batch),
    )


# -- reads ----------------------------------------------------------------------------------------
def get_memory(conn: Connection, *, memory_id: str, now: int | None = None) -> Row | None:
    now = now if now is not None else now_ms()
    return conn.one(f"SELECT * FROM memories WHERE id = ? AND {LIVE}", (memory_id, now))


def list_memories(
    conn: Connection,
    *,
    scope: Scope | None,
    types: list[str] | None = None,
    created_by: str | None = None,
    include_superseded: bool = False,
    limit: int | None = None,
    cursor: str | None = None,
    fields: str | None = "full",
    episodes: bool = False,
    now: int | None = None,
) -> dict[str, Any]:
    """One page, newest first. `episodes=True` shapes items as episodes (and lists only those)."""
    now = now if now is not None else now_ms()
    where, params = scope_sql(scope)
    where.append(LIVE)
    params.append(now)
    if not include_superseded:
        where.append("isLatest = 1")
    if episodes:
        types = ["episode"]
    if types:
        where.append(f"type IN ({','.join('?' for _ in types)})")
        params.extend(types)
    if created_by is not None:
        where.append("createdBy = ?")
        params.append(created_by)
    if episodes:
        to_item, lite = episode_doc, EPISODE_LITE
    else:
        to_item = (lambda r: with_preview(memory_doc(r))) if fields == "lite" else memory_doc
        lite = MEMORY_LITE
    return keyset_page(conn, table="memories", to_item=to_item, where=where, params=params, limit=limit,
                       cursor=cursor, fields=fields, lite_keys=lite)
