"""MCP tools for business units."""

from __future__ import annotations

from typing import Any, Literal

from ...core.errors import InvalidArgument
from ...core.validators import check_name, json_object, number, text, text_list
from ...db.paging import Fields
from ...pipeline.app import App
from . import store

BuStatus = Literal["idea", "building", "live", "revenue"]
LONG = 20_000


def _fields(**raw: Any) -> dict[str, Any]:
    """Validated, non-None BU fields (names as on the wire)."""
    out: dict[str, Any] = {}
    for key, limit in (("name", 500), ("description", LONG), ("purpose", LONG), ("domain", 500),
                       ("businessModel", LONG), ("targetCustomers", LONG), ("pricing", LONG)):
        if raw.get(key) is not None:
            out[key] = text(raw[key], key, max_bytes=limit)
    if raw.get("orchestratorId") is not None:
        out["orchestratorId"] = check_name(raw["orchestratorId"], "orchestratorId")
    if raw.get("status") is not None:
        out["status"] = raw["status"]
    if raw.get("services") is not None:
        out["services"] = text_list(raw["services"], "services", max_bytes=2_000)
    for key in ("revenueProjections", "coreTeam"):
        if raw.get(key) is not None:
            out[key] = json_object(raw[key], key)
    if raw.get("managementFee") is not None:
        out["managementFee"] = number(raw["managementFee"], "managementFee", minimum=0, maximum=100)
    return out


def register(app: App) -> None:
    db = app.db

    @app.tool("write", identity="createdBy", identity_required=False, idempotent=True)
    def create_bu(
        name: str,
        description: str,
        purpose: str,
        orchestratorId: str,
        status: BuStatus = "idea",
        domain: str | None = None,
        businessModel: str | None = None,
        targetCustomers: str | None = None,
        services: list[str] | None = None,
        pricing: str | None = None,
        revenueProjections: dict[str, Any] | None = None,
        coreTeam: dict[str, Any] | None = None,
        managementFee: float | None = None,
        createdBy: str | None = None,
    ) -> dict[str, Any]:
        """Create a business unit led by `orchestratorId` (`managementFee`: a percent, default 10); returns it."""
        creator = createdBy or check_name(orchestratorId, "orchestratorId")
        values = _fields(
            name=name, description=description, purpose=purpose, orchestratorId=orchestratorId, status=status,
            domain=domain, businessModel=businessModel, targetCustomers=targetCustomers, services=services,
            pricing=pricing, revenueProjections=revenueProjections, coreTeam=coreTeam, managementFee=managementFee,
        )
        return db.write(lambda c: store.create(c, values={**values, "createdBy": creator}))

    @app.tool("write", identity="callerOrchestrator")
    def update_bu(
        buId: str,
        callerOrchestrator: str | None = None,
        name: str | None = None,
        description: str | None = None,
        purpose: str | None = None,
        orchestratorId: str | None = None,
        status: BuStatus | None = None,
        domain: str | None = None,
        businessModel: str | None = None,
        targetCustomers: str | None = None,
        services: list[str] | None = None,
        pricing: str | None = None,
        revenueProjections: dict[str, Any] | None = None,
        coreTeam: dict[str, Any] | None = None,
        managementFee: float | None = None,
    ) -> dict[str, Any]:
        """Change some fields of a business unit (lead, creator or `system`); returns it."""
        caller = callerOrchestrator
        changes = _fields(
            name=name, description=description, purpose=purpose, orchestratorId=orchestratorId, status=status,
            domain=domain, businessModel=businessModel, targetCustomers=targetCustomers, services=services,
            pricing=pricing, revenueProjections=revenueProjections, coreTeam=coreTeam, managementFee=managementFee,
        )
        if not changes:
            raise InvalidArgument("nothing to update: pass at least one business-unit field")
        return db.write(lambda c: store.update(c, bu_id=buId, caller=caller, changes=changes))

    @app.tool("read")
    def get_bu(buId: str) -> dict[str, Any] | None:
        """Fetch a business unit by id."""
        return db.read(lambda c: store.BUS.get(c, buId))

    @app.tool("read")
    def list_bus(
        orchestratorId: str | None = None,
        status: BuStatus | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        fields: Fields = "full",
    ) -> dict[str, Any]:
        """List business units newest first, by lead `orchestratorId` and/or `status`."""
        filters = {"orchestratorId": orchestratorId, "status": status}
        return db.read(lambda c: store.BUS.page(c, filters=filters, limit=limit, cursor=cursor, fields=fields))

    @app.tool("destructive", identity="callerOrchestrator")
    def delete_bu(buId: str, callerOrchestrator: str | None = None) -> dict[str, bool]:
        """Delete a business unit for good (lead, creator or `system`); returns `{deleted}`."""
        caller = callerOrchestrator
        return db.write(lambda c: store.delete(c, bu_id=buId, caller=caller))
