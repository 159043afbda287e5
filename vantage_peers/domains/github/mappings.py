"""Repo mappings (spec §17): which orchestrator and project handle a GitHub repo's issues."""

from __future__ import annotations

from typing import Any

from ...core.ids import new_id, now_ms
from ...db import Connection, Row
from ...db.paging import keyset_page, to_doc

MAPPING_LITE = ("_id", "_creationTime", "repo", "orchestrator", "project")


def mapping_doc(row: Row) -> dict[str, Any]:
    return to_doc(row, bool_cols=("active",))


def add(conn: Connection, *, repo: str, orchestrator: str, project: str, created_by: str | None,
        now: int | None = None) -> dict[str, Any]:
    """Insert, or re-point and reactivate an existing mapping of `repo` (one row per repo)."""
    now = now or now_ms()
    new = new_id("rmp")
    row = conn.one(
        "INSERT INTO githubRepoMapping (id, repo, orchestrator, project, active, createdBy, createdAt, updatedAt) "
        "VALUES (?, ?, ?, ?, 1, ?, ?, ?) ON CONFLICT (repo) DO UPDATE SET orchestrator = excluded.orchestrator, "
        "project = excluded.project, active = 1, updatedAt = excluded.updatedAt RETURNING *, "
        "(id = ?) AS created",  # an update keeps the old id (createdAt can equal now on a same-ms re-add)
        (new, repo, orchestrator, project, created_by, now, now, new),
    )
    assert row is not None
    created = bool(row.pop("created"))
    return {"mappingId": row["id"], "created": created, **mapping_doc(row)}


def get(conn: Connection, *, repo: str) -> dict[str, Any] | None:
    row = conn.one("SELECT * FROM githubRepoMapping WHERE repo = ? COLLATE NOCASE", (repo,))
    return mapping_doc(row) if row else None


def active_for_repo(conn: Connection, repo: str) -> Row | None:
    """GitHub slugs are case-insensitive: `Octo/Repo` and `octo/repo` are the same repository."""
    return conn.one("SELECT * FROM githubRepoMapping WHERE repo = ? COLLATE NOCASE AND active = 1", (repo,))


def remove(conn: Connection, *, repo: str) -> dict[str, Any]:
    deleted = conn.execute("DELETE FROM githubRepoMapping WHERE repo = ? COLLATE NOCASE", (repo,))
    return {"repo": repo, "deleted": deleted > 0}


def list_mappings(conn: Connection, *, limit: int | None, cursor: str | None, fields: str | None) -> dict[str, Any]:
    """Newest first (spec §17), `{items, nextCursor?}`."""
    return keyset_page(conn, table="githubRepoMapping", to_item=mapping_doc, limit=limit, cursor=cursor,
                       fields=fields, lite_keys=MAPPING_LITE)

