"""Profiles (one row per orchestrator) and instances (presence, one row per running copy)."""

from __future__ import annotations

from typing import Any

from ...core.ids import new_id, now_ms
from ...db import Connection, dumps, loads
from ...db.paging import keyset_page
from ..leases import store as leases
from . import processes

PEER_LITE = ("_id", "_creationTime", "id", "orchestratorId", "instanceId", "summary", "lastSeen")


def ensure_profile(conn: Connection, orchestrator_id: str, *, now: int | None = None) -> None:
    now = now or now_ms()
    conn.execute(
        "INSERT INTO profiles (id, orchestratorId, createdAt, updatedAt) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (orchestratorId) DO NOTHING",
        (new_id("prf"), orchestrator_id, now, now),
    )


def _upsert_instance(conn: Connection, orchestrator_id: str, instance_id: str | None, **values: Any) -> None:
    """Insert-or-update one instance row; `values` are column=value pairs to set."""
    now = now_ms()
    values.setdefault("lastSeen", now)
    cols = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    updates = ", ".join(f"{c} = excluded.{c}" for c in values)
    conn.execute(
        f"INSERT INTO instances (id, orchestratorId, instanceId, createdAt, {cols}) VALUES (?, ?, ?, ?, {marks}) "
        f"ON CONFLICT (orchestratorId, instanceId) DO UPDATE SET {updates}",
        (new_id("ins"), orchestrator_id, instance_id or "", now, *values.values()),
    )


def touch(conn: Connection, *, orchestrator_id: str, instance_id: str | None, now: int | None = None,
          session: str | None = None) -> None:
    """Register presence: the profile exists and this instance was seen now; its leases live on
    (with `session`, the calling process's: only the leases of that session and session-less ones)."""
    ensure_profile(conn, orchestrator_id)
    _upsert_instance(conn, orchestrator_id, instance_id)
    leases.renew_for_holder(conn, holder=orchestrator_id, instance=instance_id, now=now or now_ms(), session=session)


def update_profile(
    conn: Connection,
    *,
    orchestrator_id: str,
    name: str | None = None,
    instance_id: str | None = None,
    static: dict[str, Any] | None = None,
    dynamic: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Upsert; only the given keys change (static keys merge into the stored object)."""
    now = now_ms()
    ensure_profile(conn, orchestrator_id, now=now)
    row = conn.one("SELECT name, static FROM profiles WHERE orchestratorId = ?", (orchestrator_id,))
    merged = loads(row["static"]) or {}
    if static:
        merged.update({k: v for k, v in static.items() if v is not None})
    conn.execute(
        "UPDATE profiles SET name = ?, static = ?, updatedAt = ? WHERE orchestratorId = ?",
        (name if name is not None else row["name"], dumps(merged) if merged else None, now, orchestrator_id),
    )
    if dynamic or instance_id:
        values = {k: v for k, v in (dynamic or {}).items() if v is not None}
        _upsert_instance(conn, orchestrator_id, instance_id, **values)
    return get_profile(conn, orchestrator_id=orchestrator_id)  # type: ignore[return-value]


def set_summary(conn: Connection, *, orchestrator_id: str, instance_id: str, summary: str) -> dict[str, Any]:
    ensure_profile(conn, orchestrator_id)
    _upsert_instance(conn, orchestrator_id, instance_id, summary=summary)
    return conn.one(
        "SELECT * FROM instances WHERE orchestratorId = ? AND instanceId = ?", (orchestrator_id, instance_id)
    )  # type: ignore[return-value]


def _instance_doc(row: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "_id": row["id"],
        "_creationTime": row["createdAt"],
        "id": row["orchestratorId"],
        "orchestratorId": row["orchestratorId"],
        "lastSeen": row["lastSeen"],
        "sessionCount": row["sessionCount"],
    }
    if row["instanceId"]:
        doc["instanceId"] = row["instanceId"]
    for key in ("summary", "currentTask"):
        if row.get(key) is not None:
            doc[key] = row[key]
    if row.get("name") is not None:
        doc["name"] = row["name"]
    return doc


def get_profile(conn: Connection, *, orchestrator_id: str) -> dict[str, Any] | None:
    row = conn.one("SELECT * FROM profiles WHERE orchestratorId = ?", (orchestrator_id,))
    if row is None:
        return None
    instances = [
        _instance_doc(r)
        for r in conn.query(
            "SELECT * FROM instances WHERE orchestratorId = ? ORDER BY lastSeen DESC, id DESC", (orchestrator_id,)
        )
    ]
    doc: dict[str, Any] = {
        "_id": row["id"],
        "_creationTime": row["createdAt"],
        "orchestratorId": row["orchestratorId"],
        "updatedAt": row["updatedAt"],
    }
    if row["name"] is not None:
        doc["name"] = row["name"]
    static = loads(row["static"])
    if static:
        doc["static"] = static
    processes.liveness_of(conn, instances, now_ms())
    if instances:
        latest = instances[0]
        doc["dynamic"] = {
            k: latest[k] for k in ("currentTask", "lastSeen", "sessionCount") if k in latest
        }
        summaries = [i for i in instances if "summary" in i]
        if summaries:
            doc["summary"] = summaries[0]["summary"]
        doc["instances"] = [{k: v for k, v in i.items() if k not in ("id", "orchestratorId")} for i in instances]
    return doc


def list_peers(conn: Connection, *, limit: int | None, cursor: str | None, fields: str | None) -> dict[str, Any]:
    """Instances, most recently seen first; full items also have `live` (a server process of it
    heartbeats, docs/presence.md) and `processes` (how many do)."""
    page = keyset_page(
        conn,
        table="(SELECT i.*, p.name AS name FROM instances i LEFT JOIN profiles p USING (orchestratorId))",
        to_item=_instance_doc,
        sort_col="lastSeen",
        limit=limit,
        cursor=cursor,
        fields=fields,
        lite_keys=PEER_LITE,
    )
    if fields != "lite":  # the lite projection stays the spec's
        processes.liveness_of(conn, page["items"], now_ms())
    return page


def all_orchestrators(conn: Connection) -> list[str]:
    return [r["orchestratorId"] for r in conn.query("SELECT orchestratorId FROM profiles ORDER BY orchestratorId")]


def unknown_name_warning(conn: Connection, name: str) -> str | None:
    """`no profile named 'bbo'; known: bob, carol` when `name` has no profile (nearest names first)."""
    if conn.scalar("SELECT 1 FROM profiles WHERE orchestratorId = ?", (name,)) is not None:
        return None
    import difflib

    known = all_orchestrators(conn)
    near = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    shown = near + [k for k in known if k not in near]
    listed = ", ".join(shown[:10]) + (f" … ({len(known)} in all)" if len(known) > 10 else "")
    return f"no profile named {name!r}; known: {listed or 'none yet'}"


def orchestrator_of_instance(conn: Connection, instance_id: str) -> str | None:
    """The orchestrator that runs `instance_id`, when exactly one does."""
    rows = conn.query(
        "SELECT DISTINCT orchestratorId FROM instances WHERE instanceId = ? AND instanceId != ''", (instance_id,)
    )
    return rows[0]["orchestratorId"] if len(rows) == 1 else None
