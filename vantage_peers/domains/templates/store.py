"""Mission templates: upsert by name, listing, seeding, and instantiation into a mission."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ...core.errors import InvalidArgument, NotFound
from ...core.ids import new_id, now_ms
from ...db import Connection, Row, dumps, loads
from ...db.paging import keyset_page, to_doc
from ..missions import store as missions
from ..tasks import store as tasks
from .seeds import SEED_AUTHOR, TEMPLATES

TEMPLATE_LITE = ("_id", "_creationTime", "name", "isDefault", "stepCount")
MAX_STEPS = 100
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}")


def template_doc(row: Row) -> dict[str, Any]:
    doc = to_doc(row, json_cols=("steps",), bool_cols=("isDefault",))
    doc["stepCount"] = len(doc.get("steps") or [])
    return doc


def get_template(conn: Connection, *, name: str) -> dict[str, Any] | None:
    row = conn.one("SELECT * FROM missionTemplates WHERE name = ?", (name,))
    return template_doc(row) if row else None


def check_steps(steps: Sequence[Mapping[str, Any]]) -> None:
    """Step indexes in dependsOn must name other steps of the template and form no cycle."""
    if not steps:
        raise InvalidArgument("steps must hold at least one step")
    if len(steps) > MAX_STEPS:
        raise InvalidArgument(f"steps holds more than {MAX_STEPS} steps")
    for i, step in enumerate(steps):
        for dep in step.get("dependsOn") or []:
            if not 0 <= dep < len(steps) or dep == i:
                raise InvalidArgument(f"steps[{i}].dependsOn: {dep} is not the index of another step "
                                      f"(0..{len(steps) - 1})")
    state = [0] * len(steps)  # 0 new, 1 visiting, 2 done

    def visit(i: int) -> None:
        if state[i] == 1:
            raise InvalidArgument(f"steps dependsOn form a cycle through step {i}")
        if state[i] == 0:
            state[i] = 1
            for dep in steps[i].get("dependsOn") or []:
                visit(dep)
            state[i] = 2

    for i in range(len(steps)):
        visit(i)


def upsert_template(conn: Connection, *, name: str, steps: list[dict[str, Any]], description: str | None,
                    is_default: bool | None, created_by: str, now: int | None = None) -> dict[str, Any]:
    check_steps(steps)
    now = now or now_ms()
    existed = conn.scalar("SELECT 1 FROM missionTemplates WHERE name = ?", (name,)) is not None
    conn.execute(
        "INSERT INTO missionTemplates (id, name, description, steps, isDefault, createdBy, createdAt, updatedAt) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET steps = excluded.steps, "
        "description = coalesce(?, missionTemplates.description), isDefault = coalesce(?, missionTemplates.isDefault), "
        "createdBy = excluded.createdBy, updatedAt = excluded.updatedAt",
        (new_id("tpl"), name, description, dumps(steps), int(bool(is_default)), created_by, now, now,
         description, None if is_default is None else int(is_default)),
    )
    if is_default:  # one default template: the one used for auto-creation
        conn.execute("UPDATE missionTemplates SET isDefault = 0 WHERE name != ? AND isDefault = 1", (name,))
    row = conn.one("SELECT id FROM missionTemplates WHERE name = ?", (name,))
    return {"templateId": row["id"], "name": name, "created": not existed, "stepCount": len(steps)}


def list_templates(conn: Connection, *, limit: int | None, cursor: str | None, fields: str | None) -> dict[str, Any]:
    return keyset_page(conn, table="missionTemplates", to_item=template_doc, sort_col="name", descending=False,
                       limit=limit, cursor=cursor, fields=fields, lite_keys=TEMPLATE_LITE)


def seed_templates(conn: Connection, *, now: int | None = None) -> int:
    """Insert the documented templates that are missing; returns how many were added."""
    now = now or now_ms()
    has_default = conn.scalar("SELECT 1 FROM missionTemplates WHERE isDefault = 1") is not None
    added = 0
    for tpl in TEMPLATES:
        default = tpl["isDefault"] and not has_default
        added += conn.execute(
            "INSERT INTO missionTemplates (id, name, description, steps, isDefault, createdBy, createdAt, updatedAt) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
            (new_id("tpl"), tpl["name"], tpl["description"], dumps(tpl["steps"]), int(default), SEED_AUTHOR,
             now, now),
        )
    return added


def missing_seeds(conn: Connection) -> bool:
    names = [t["name"] for t in TEMPLATES]
    marks = ",".join("?" for _ in names)
    return conn.scalar(f"SELECT count(*) FROM missionTemplates WHERE name IN ({marks})", names) < len(names)


def fill(text: str, context: Mapping[str, str]) -> str:
    """Replace `{{key}}` with context[key]; unknown placeholders stay as written."""
    return PLACEHOLDER.sub(lambda m: context.get(m.group(1), m.group(0)), text)


def instantiate(conn: Connection, *, template_name: str, mission_id: str, context: Mapping[str, str],
                title_prefix: str | None, caller: str | None, now: int | None = None) -> dict[str, Any]:
    """One task per step in the mission; step dependsOn indexes become the new task ids."""
    row = conn.one("SELECT * FROM missionTemplates WHERE name = ?", (template_name,))
    if row is None:
        raise NotFound(f"mission template {template_name!r} does not exist; see list_mission_templates")
    mission = missions.require(conn, mission_id)
    now = now or now_ms()
    steps = loads(row["steps"])
    ids: list[str] = []
    for step in steps:
        title = fill(step["title"], context)
        payload: dict[str, Any] = {
            "title": f"{title_prefix} {title}" if title_prefix else title,
            "description": fill(step.get("description") or "", context) or None,
            "assignedTo": step.get("assignedTo") or mission["pilot"],
            "priority": mission["priority"], "project": mission["project"], "missionId": mission_id,
            "tags": step.get("tags"), "createdBy": caller or mission["createdBy"],
        }
        ids.append(tasks.create_task(conn, payload=payload, now=now))
    for task_id, step in zip(ids, steps, strict=True):
        if step.get("dependsOn"):
            deps = [ids[i] for i in step["dependsOn"]]
            conn.execute("UPDATE tasks SET dependsOn = ? WHERE id = ?", (dumps(deps), task_id))
    return {"taskIds": ids, "count": len(ids)}
