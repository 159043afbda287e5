"""Importing a checked bundle into a target namespace: dry-run, merge or replace.

Every decision is made inside the one write transaction that applies it (dry-run runs the same
planning in a read transaction and writes nothing):
- a record whose source id was already imported into this namespace (table `okfImports`), or
  that already exists in the namespace under its own id, is skipped — so merge is idempotent;
- otherwise it is added under its own id when that id is free and in our id format, else under a
  new id (remapped), and references (relations, supersededBy, linkedMemoryIds, dependsOn) follow;
- replace first deletes everything the target namespace owns (what export would put in its bundle)
  and its import records, then adds every record — all in the same transaction.
Embeddings are queued by the memories insert trigger, as for any new memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ...core import parties
from ...core.errors import Forbidden
from ...core.ids import new_id, now_ms
from ...core.rbac import Actor
from ...db import Connection, dumps
from . import export
from .format import Bundle

PREFIX = {"memory": "mem", "briefing": "brf", "task": "tsk", "segment": "seg"}
TABLE = {"memory": "memories", "briefing": "briefingNotes", "task": "tasks", "segment": "taskSegments"}
PLURAL = {"memory": "memories", "briefing": "briefings", "task": "tasks"}
_OUR_ID = re.compile(r"^[a-z]{3}_[0-9A-HJKMNP-TV-Z]{26}$")


@dataclass
class Plan:
    namespace: str
    mode: str
    ids: dict[str, dict[str, str]] = field(default_factory=lambda: {k: {} for k in PLURAL})  # kind: src->dst
    add: dict[str, list[Any]] = field(default_factory=lambda: {k: [] for k in PLURAL})
    skipped: dict[str, int] = field(default_factory=lambda: {k: 0 for k in PLURAL})
    deleted: dict[str, int] = field(default_factory=lambda: {k: 0 for k in PLURAL})
    remapped: int = 0
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "added": {PLURAL[k]: len(v) for k, v in self.add.items()},
            "skipped": {PLURAL[k]: v for k, v in self.skipped.items()},
            "deleted": {PLURAL[k]: v for k, v in self.deleted.items()},
            "remapped": self.remapped,
        }


LOCAL = Actor()  # the local operator (CLI, stdio without identity): trusted


def _exists(conn: Connection, kind: str, doc_id: str) -> bool:
    return conn.scalar(f"SELECT 1 FROM {TABLE[kind]} WHERE id = ?", (doc_id,)) is not None


def _owned(conn: Connection, namespace: str, actor: Actor | None = None,
           kept: list[str] | None = None) -> dict[str, set[str]]:
    """Ids of the rows the namespace owns (the export definition, expired memories included) that
    `actor` could delete: memories by namespace (the caller's scope allows the namespace), tasks and
    briefing notes only when the actor created them, as delete_task / delete_briefing_note require."""
    actor = actor or LOCAL
    out = {"memory": {r["id"] for r in export.memory_rows(conn, namespace, now=0, live_only=False)}}
    for kind, record, rows in (("briefing", "briefing note", export.briefing_rows(conn, namespace)),
                               ("task", "task", export.task_rows(conn, namespace))):
        out[kind] = set()
        for r in rows:
            if actor.is_party(parties.names(record, {"createdBy": None, "assignedTo": None, **r}, "force")):
                out[kind].add(r["id"])
            elif kept is not None:
                kept.append(f"{kind} {r['id']} of {r.get('createdBy')} kept: only its creator or system may delete it")
    return out


def plan(conn: Connection, bundle: Bundle, namespace: str, mode: str, *, now: int | None = None,
         actor: Actor | None = None) -> Plan:
    """What importing would do. For `replace` it plans as if the owned rows were already deleted."""
    now = now if now is not None else now_ms()
    result = Plan(namespace, mode)
    owned = _owned(conn, namespace, actor, result.warnings if mode == "replace" else None)
    freed: dict[str, set[str]] = {k: set() for k in PLURAL}
    imported: dict[tuple[str, str], str] = {}
    if mode == "replace":
        result.deleted = {k: len(v) for k, v in owned.items()}
        owned, freed = {k: set() for k in PLURAL}, owned
    else:
        imported = {(r["kind"], r["sourceId"]): r["targetId"] for r in conn.query(
            "SELECT kind, sourceId, targetId FROM okfImports WHERE namespace = ?", (namespace,))}
    for kind in PLURAL:
        for record in bundle.records[kind]:
            if kind == "memory" and record.expiresAt is not None and record.expiresAt <= now:
                result.warnings.append(f"memory {record.id} has expired; not imported")
                continue
            earlier = imported.get((kind, record.id))
            if earlier is not None and earlier in owned[kind]:
                result.ids[kind][record.id] = earlier
                result.skipped[kind] += 1
                continue
            if record.id in owned[kind]:
                result.ids[kind][record.id] = record.id
                result.skipped[kind] += 1
                continue
            free = record.id in freed[kind] or not _exists(conn, kind, record.id)
            ours = record.id.startswith(PREFIX[kind] + "_") and _OUR_ID.match(record.id) is not None
            target = record.id if free and ours else new_id(PREFIX[kind])
            result.remapped += target != record.id
            result.ids[kind][record.id] = target
            result.add[kind].append(record)
    return result


def _ref(conn: Connection, kind: str, ids: dict[str, str], value: str, warnings: list[str], what: str) -> str | None:
    if value in ids:
        return ids[value]
    if _exists(conn, kind, value):
        return value
    warnings.append(f"{what} {value} does not exist here; dropped")
    return None


def apply(conn: Connection, bundle: Bundle, namespace: str, mode: str, *, now: int | None = None,
          actor: Actor | None = None) -> Plan:
    """Plan and write in the caller's (write) transaction.

    `actor` is who imports (None: the local operator, trusted, as the CLI). An agent's import writes
    every record as itself (a bundle cannot make it act as another orchestrator), attaches a task to a
    mission only when the actor is that mission's creator or pilot, and `replace` deletes only what the
    actor could delete one by one."""
    now = now if now is not None else now_ms()
    actor = actor or LOCAL
    if not actor.privileged and actor.identity is None and actor.acts_as is not None:
        raise Forbidden("import_okf_bundle writes tasks, memories and briefing notes: it needs a credential that "
                        "acts as exactly one orchestrator")
    author = None if actor.privileged or actor.identity is None else actor.identity
    kept: list[str] = []
    if mode == "replace":
        owned = _owned(conn, namespace, actor, kept)
        for kind, table in (("task", "tasks"), ("briefing", "briefingNotes"), ("memory", "memories")):
            ids = sorted(owned[kind])
            for start in range(0, len(ids), 500):
                chunk = ids[start:start + 500]
                conn.execute(f"DELETE FROM {table} WHERE id IN ({','.join('?' for _ in chunk)})", chunk)
        conn.execute("DELETE FROM okfImports WHERE namespace = ?", (namespace,))
        result = plan(conn, bundle, namespace, "merge", now=now, actor=actor)  # owned rows are gone now
        result.mode, result.deleted = "replace", {k: len(v) for k, v in owned.items()}
        result.warnings.extend(kept)
    else:
        result = plan(conn, bundle, namespace, mode, now=now, actor=actor)
    if author is not None:
        for kind in PLURAL:
            for r in result.add[kind]:
                if getattr(r, "createdBy", None) not in (None, author):
                    result.warnings.append(f"{kind} {r.id} by {r.createdBy} imported as {author}'s")
                    break
    source = bundle.manifest.source.namespace if bundle.manifest else namespace
    warn = result.warnings
    for r in result.add["memory"]:
        relations = []
        for rel in r.relations or []:
            target = _ref(conn, "memory", result.ids["memory"], rel.targetId, warn, "relation target memory")
            if target is not None:
                relations.append({"targetId": target, "type": rel.type})
        superseded = (_ref(conn, "memory", result.ids["memory"], r.supersededBy, warn, "superseding memory")
                      if r.supersededBy else None)
        conn.execute(
            "INSERT INTO memories (id, namespace, type, content, createdBy, relations, isLatest, supersededBy, "
            "deletedAt, ttl, expiresAt, episode, createdAt, updatedAt) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (result.ids["memory"][r.id], namespace, r.type, r.content, author or r.createdBy, dumps(relations or None),
             int(r.isLatest), superseded, r.deletedAt, r.ttl, r.expiresAt,
             dumps(r.episode.model_dump(exclude_none=True)) if r.episode else None, r.createdAt, r.updatedAt))
    for r in result.add["briefing"]:
        linked = [m for m in (_ref(conn, "memory", result.ids["memory"], x, warn, "linked memory")
                              for x in r.linkedMemoryIds or []) if m is not None]
        conn.execute(
            "INSERT INTO briefingNotes (id, title, topic, participants, content, decisions, linkedMemoryIds, "
            "createdBy, updatedBy, createdAt, updatedAt) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (result.ids["briefing"][r.id], r.title, export.rebase(r.topic, source, namespace), dumps(r.participants),
             r.content, dumps(r.decisions), dumps(linked) if r.linkedMemoryIds is not None else None,
             author or r.createdBy, author or r.updatedBy, r.createdAt, r.updatedAt))
    for r in result.add["task"]:
        _insert_task(conn, r, result, source, namespace, actor, author)
    conn.executemany(
        "INSERT INTO okfImports (namespace, kind, sourceId, targetId, importedAt) VALUES (?,?,?,?,?) "
        "ON CONFLICT (namespace, kind, sourceId) DO UPDATE SET targetId = excluded.targetId, "
        "importedAt = excluded.importedAt",
        [(namespace, kind, src, dst, now) for kind in PLURAL for src, dst in result.ids[kind].items()])
    return result


def _insert_task(conn: Connection, r: Any, result: Plan, source: str, namespace: str, actor: Actor,
                 author: str | None) -> None:
    warn = result.warnings
    deps = [d for d in (_ref(conn, "task", result.ids["task"], x, warn, "dependency task")
                        for x in r.dependsOn or []) if d is not None]
    mission = None
    if r.missionId is not None:
        row = conn.one("SELECT createdBy, pilot FROM missions WHERE id = ?", (r.missionId,))
        if row is not None and actor.is_party([row["createdBy"], row["pilot"]]):
            mission = r.missionId
        elif row is not None:
            warn.append(f"mission {r.missionId} of task {r.id} belongs to {row['createdBy']} (pilot {row['pilot']}); "
                        "missionId dropped")
        else:
            warn.append(f"mission {r.missionId} of task {r.id} does not exist here; missionId dropped")
    task_id = result.ids["task"][r.id]
    conn.execute(
        "INSERT INTO tasks (id, title, description, project, tags, assignedTo, assignedToInstance, priority, status, "
        "dependsOn, missionId, estimatedMinutes, actualMinutes, durationSource, startedAt, completedAt, dueDate, "
        "completionNote, blockedBy, cancelReason, paused, pausedAt, createdBy, createdAt, updatedAt) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (task_id, r.title, r.description, export.rebase(r.project, source, namespace), dumps(r.tags), r.assignedTo,
         r.assignedToInstance, r.priority, r.status, dumps(deps) if r.dependsOn is not None else None, mission,
         r.estimatedMinutes, r.actualMinutes, r.durationSource, r.startedAt, r.completedAt, r.dueDate,
         r.completionNote, r.blockedBy, r.cancelReason, int(r.paused), r.pausedAt, author or r.createdBy, r.createdAt,
         r.updatedAt))
    for s in r.segments or []:
        seg_id = s.id if _OUR_ID.match(s.id) and s.id.startswith("seg_") and not _exists(conn, "segment", s.id) \
            else new_id("seg")
        conn.execute("INSERT INTO taskSegments (id, taskId, orchestrator, startedAt, endedAt, createdAt) "
                     "VALUES (?,?,?,?,?,?)", (seg_id, task_id, s.orchestrator, s.startedAt, s.endedAt, s.createdAt))
