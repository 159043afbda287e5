"""Business units. SQL only; each function runs inside the caller's db.read / db.write."""

from __future__ import annotations

from typing import Any

from ...core import parties
from ...core.errors import Conflict
from ...core.rbac import require_party
from ...db import Connection
from ...db.table import Table

STATUSES = ("idea", "building", "live", "revenue")
DEFAULT_MANAGEMENT_FEE = 10
BUS = Table(
    name="businessUnits", prefix="bu", label="business unit",
    json_cols=("services", "revenueProjections", "coreTeam"),
    lite_keys=("_id", "_creationTime", "name", "status", "orchestratorId"),
)


def _check_name_free(conn: Connection, name: str, bu_id: str | None = None) -> None:
    other = conn.scalar("SELECT id FROM businessUnits WHERE name = ? AND id IS NOT ?", (name, bu_id))
    if other is not None:
        raise Conflict(f"a business unit named {name!r} already exists ({other}); use update_bu on it or pick another name")


def create(conn: Connection, *, values: dict[str, Any]) -> dict[str, Any]:
    _check_name_free(conn, values["name"])
    bu_id = BUS.insert(conn, {"managementFee": DEFAULT_MANAGEMENT_FEE, **{k: v for k, v in values.items() if v is not None}})
    return BUS.get(conn, bu_id)  # type: ignore[return-value]


def _guard(conn: Connection, bu_id: str, caller: str, action: str) -> dict[str, Any]:
    row = BUS.require(conn, bu_id)
    verb = "force" if action == "delete" else "change"
    require_party(caller, parties.names("business unit", row, verb), action=f"{action} business unit {bu_id}",
                  role="its lead orchestrator or creator")
    return row


def update(conn: Connection, *, bu_id: str, caller: str, changes: dict[str, Any]) -> dict[str, Any]:
    _guard(conn, bu_id, caller, "update")
    if "name" in changes:
        _check_name_free(conn, changes["name"], bu_id)
    BUS.patch(conn, bu_id, {**changes, "updatedBy": caller})
    return BUS.get(conn, bu_id)  # type: ignore[return-value]


def delete(conn: Connection, *, bu_id: str, caller: str) -> dict[str, bool]:
    if BUS.row(conn, bu_id) is None:
        return {"deleted": False}
    _guard(conn, bu_id, caller, "delete")
    return {"deleted": BUS.delete(conn, bu_id)}
