"""The component registry: latest revision per (name, type) plus every stored revision.

Content is kept exactly as sent (a Python str is stored as UTF-8 by SQLite and read back
unchanged: CRLF, trailing whitespace, non-ASCII), with its sha256, so a file can be rebuilt
byte for byte and the rebuild verified against `contentHash`.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ...core import parties
from ...core.errors import NotFound
from ...core.ids import new_id, now_ms
from ...core.rbac import require_party
from ...db import Connection
from ...db.paging import equals
from ...db.table import Table
from ...search.fts import fts_query
from ...search.keyword import keyword_docs

TYPES = ("agent", "skill", "hook", "plugin")
COMPONENTS = Table(
    name="components", prefix="cmp", label="component",
    lite_keys=("_id", "_creationTime", "name", "type", "team"),
)
REVISIONS = Table(name="componentRevisions", prefix="cmr", label="component revision")


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def _add_revision(conn: Connection, *, component_id: str, revision: int, version: str | None, content: str,
                  digest: str, created_by: str, now: int) -> None:
    conn.execute(
        "INSERT INTO componentRevisions (id, componentId, revision, version, content, contentHash, size, "
        "createdBy, createdAt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (new_id(REVISIONS.prefix), component_id, revision, version, content, digest,
         len(content.encode("utf-8")), created_by, now),
    )


def _summary(row: dict[str, Any], **extra: Any) -> dict[str, Any]:
    out = {k: row[k] for k in ("name", "type", "revision", "contentHash", "size") if row.get(k) is not None}
    if row.get("version") is not None:
        out["version"] = row["version"]
    return {"_id": row["id"], **out, **extra}


def register(conn: Connection, *, name: str, type_: str, content: str, created_by: str, team: str | None,
             version: str | None, project: str | None) -> dict[str, Any]:
    """Insert a component, or store a new revision of an existing (name, type).

    Registering identical content and version again stores no revision (`newRevision: false`).
    `team` / `project` are updated only when given.
    """
    now, digest = now_ms(), content_hash(content)
    size = len(content.encode("utf-8"))
    row = conn.one("SELECT * FROM components WHERE name = ? AND type = ?", (name, type_))
    if row is None:
        comp_id = COMPONENTS.insert(conn, {
            "name": name, "type": type_, "team": team, "project": project, "version": version, "revision": 1,
            "content": content, "contentHash": digest, "size": size, "createdBy": created_by,
        }, now=now)
        _add_revision(conn, component_id=comp_id, revision=1, version=version, content=content, digest=digest,
                      created_by=created_by, now=now)
        return _summary(COMPONENTS.require(conn, comp_id), created=True, newRevision=True)
    if row["contentHash"] == digest and row["content"] == content and (version is None or version == row["version"]):
        COMPONENTS.patch(conn, row["id"], {"team": team, "project": project}, now=now)
        return _summary(COMPONENTS.require(conn, row["id"]), created=False, newRevision=False)
    revision = row["revision"] + 1
    COMPONENTS.patch(conn, row["id"], {
        "team": team, "project": project, "version": version, "revision": revision, "content": content,
        "contentHash": digest, "size": size, "updatedBy": created_by,
    }, now=now)
    _add_revision(conn, component_id=row["id"], revision=revision,
                  version=version if version is not None else row["version"], content=content, digest=digest,
                  created_by=created_by, now=now)
    return _summary(COMPONENTS.require(conn, row["id"]), created=False, newRevision=True)


def find(conn: Connection, *, name: str, type_: str) -> dict[str, Any] | None:
    return conn.one("SELECT * FROM components WHERE name = ? AND type = ?", (name, type_))


def get(conn: Connection, *, name: str, type_: str, version: str | None = None,
        revision: int | None = None) -> dict[str, Any] | None:
    """The latest revision, or the one asked for (`revision` number, or newest with `version` label)."""
    row = find(conn, name=name, type_=type_)
    if row is None:
        return None
    doc = COMPONENTS.doc(row)
    if version is None and revision is None:
        doc["revisions"] = conn.scalar("SELECT count(*) FROM componentRevisions WHERE componentId = ?", (row["id"],))
        return doc
    clauses, args = equals((("componentId", row["id"]), ("revision", revision), ("version", version)))
    old = conn.one(
        f"SELECT * FROM componentRevisions WHERE {' AND '.join(clauses)} ORDER BY revision DESC LIMIT 1", args
    )
    if old is None:
        return None
    for key in ("revision", "version", "content", "contentHash", "size"):
        doc.pop(key, None)
        if old[key] is not None:
            doc[key] = old[key]
    doc["revisionCreatedBy"], doc["revisionCreatedAt"] = old["createdBy"], old["createdAt"]
    doc["latestRevision"] = row["revision"]
    return doc


def history(conn: Connection, component_id: str) -> list[dict[str, Any]]:
    rows = conn.query(
        "SELECT revision, version, contentHash, size, createdBy, createdAt FROM componentRevisions "
        "WHERE componentId = ? ORDER BY revision", (component_id,),
    )
    return [{k: v for k, v in r.items() if v is not None} for r in rows]


def update(conn: Connection, *, name: str, type_: str, caller: str | None, content: str | None,
           version: str | None, team: str | None, project: str | None) -> dict[str, Any]:
    row = find(conn, name=name, type_=type_)
    if row is None:
        raise NotFound(f"no {type_} component named {name}; register it with register_component first")
    # A new content or version label is a new revision (history is never rewritten);
    # team / project are plain metadata of the component.
    if (content is not None and content != row["content"]) or (version is not None and version != row["version"]):
        return register(conn, name=name, type_=type_, content=row["content"] if content is None else content,
                        created_by=caller or row["createdBy"], team=team, version=version, project=project)
    COMPONENTS.patch(conn, row["id"], {"team": team, "project": project, "updatedBy": caller})
    return _summary(COMPONENTS.require(conn, row["id"]), created=False, newRevision=False)


def delete(conn: Connection, *, name: str, type_: str, caller: str) -> dict[str, Any]:
    row = find(conn, name=name, type_=type_)
    if row is None:
        return {"deleted": False, "revisionsDeleted": 0}
    require_party(caller, parties.names("component", row, "force"), action=f"delete {type_} component {name}",
                  role="its creator")
    count = conn.scalar("SELECT count(*) FROM componentRevisions WHERE componentId = ?", (row["id"],))
    COMPONENTS.delete(conn, row["id"])
    return {"deleted": True, "revisionsDeleted": count}


def list_components(conn: Connection, *, type_: str | None, team: str | None, limit: int | None,
                    cursor: str | None, fields: str | None) -> dict[str, Any]:
    return COMPONENTS.page(conn, filters={"type": type_, "team": team}, limit=limit, cursor=cursor, fields=fields)


def _without_content(row: dict[str, Any]) -> dict[str, Any]:
    """A search hit: the document without its (whole-file) content."""
    doc = COMPONENTS.doc(row)
    doc.pop("content", None)
    return doc


def search(conn: Connection, *, query: str, type_: str | None, limit: int) -> list[dict[str, Any]]:
    """Substring search over name and team: trigram FTS (BM25) for words of 3+ characters, else LIKE."""
    words = query.split()
    where, params = [], []
    if type_ is not None:
        where.append("d.type = ?")
        params.append(type_)
    match = fts_query(" ".join(w for w in words if len(w) >= 3))
    if match is not None and all(len(w) >= 3 for w in words):
        return keyword_docs(conn, fts="components_fts", table=COMPONENTS.name, match=match, where=where,
                            params=params, limit=limit, shape=_without_content)
    clauses, args = list(where), list(params)
    for word in words[:32]:
        pattern = "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        clauses.append("(d.name LIKE ? ESCAPE '\\' OR coalesce(d.team, '') LIKE ? ESCAPE '\\')")
        args.extend([pattern, pattern])
    if not clauses or not words:
        return []
    rows = conn.query(
        f"SELECT d.* FROM components d WHERE {' AND '.join(clauses)} ORDER BY length(d.name), d.name, d.id LIMIT ?",
        [*args, limit],
    )
    return [{k: v for k, v in COMPONENTS.doc(r).items() if k != "content"} | {"score": 0.0} for r in rows]
