"""Business units: create defaults, ownership RBAC, partial updates, paging, hostile input."""

from __future__ import annotations

import pytest
from support.records_helpers import call, error, page_all

pytestmark = pytest.mark.backends

BU = {"name": "VantagePeers", "description": "Shared memory for agents", "purpose": "Coordinate fleets",
      "orchestratorId": "sigma"}


def create(tools, **over):
    return call(tools, "create_bu", {**BU, **over})


def test_create_full_bu_with_defaults(tools):
    bu = create(tools, status="live", domain="vantagepeers.com", businessModel="SaaS", targetCustomers="dev teams",
                services=["hosting", "support"], pricing="per seat",
                revenueProjections={"A1": 10_000, "A2": 50_000, "A3": 200_000},
                coreTeam={"agents": ["dev-convex-expert"], "skills": [], "hooks": ["pre-commit"], "plugins": []})
    assert bu["_id"].startswith("bu_") and bu["managementFee"] == 10 and bu["createdBy"] == "sigma"
    assert bu["revenueProjections"]["A3"] == 200_000 and bu["coreTeam"]["hooks"] == ["pre-commit"]
    assert len(bu) >= 18  # the "18+ keys" full object
    assert call(tools, "get_bu", {"buId": bu["_id"]}) == bu
    assert call(tools, "get_bu", {"buId": "bu_missing"}) is None
    minimal = create(tools, name="Other")
    assert minimal["status"] == "idea" and minimal["managementFee"] == 10
    assert create(tools, name="Cheap", managementFee=2.5)["managementFee"] == 2.5


def test_names_are_unique_case_insensitively(tools):
    create(tools)
    assert "CONFLICT" in error(tools, "create_bu", {**BU, "name": "vantagepeers"})
    other = create(tools, name="Second")
    assert "CONFLICT" in error(tools, "update_bu", {"buId": other["_id"], "callerOrchestrator": "sigma",
                                                    "name": "VANTAGEPEERS"})


def test_update_bu_partial_by_lead_creator_or_system(tools):
    bu = create(tools, createdBy="pi", services=["a"])
    up = call(tools, "update_bu", {"buId": bu["_id"], "callerOrchestrator": "sigma", "status": "revenue",
                                   "managementFee": 15})
    assert up["status"] == "revenue" and up["managementFee"] == 15 and up["services"] == ["a"]
    assert up["updatedBy"] == "sigma" and up["description"] == BU["description"]
    up = call(tools, "update_bu", {"buId": bu["_id"], "callerOrchestrator": "pi", "orchestratorId": "tau"})
    assert up["orchestratorId"] == "tau"
    denied = error(tools, "update_bu", {"buId": bu["_id"], "callerOrchestrator": "sigma", "pricing": "free"})
    assert "RBAC_DENIED" in denied and "tau" in denied  # sigma no longer leads it
    assert call(tools, "update_bu", {"buId": bu["_id"], "callerOrchestrator": "system", "pricing": "free"})
    assert "INVALID_ARGUMENT" in error(tools, "update_bu", {"buId": bu["_id"], "pricing": "x"})  # no caller
    assert "NOT_FOUND" in error(tools, "update_bu", {"buId": "bu_nope", "callerOrchestrator": "system", "pricing": "x"})
    assert "nothing to update" in error(tools, "update_bu", {"buId": bu["_id"], "callerOrchestrator": "tau"})


def test_delete_bu_rbac(tools):
    bu = create(tools)
    assert "RBAC_DENIED" in error(tools, "delete_bu", {"buId": bu["_id"], "callerOrchestrator": "mallory"})
    assert "INVALID_ARGUMENT" in error(tools, "delete_bu", {"buId": bu["_id"]})
    assert call(tools, "delete_bu", {"buId": bu["_id"], "callerOrchestrator": "sigma"}) == {"deleted": True}
    assert call(tools, "delete_bu", {"buId": bu["_id"], "callerOrchestrator": "sigma"}) == {"deleted": False}
    assert call(tools, "get_bu", {"buId": bu["_id"]}) is None


def test_list_bus_insert_n_filters_cursor_lite(tools):
    n = 31
    statuses = ("idea", "building", "live", "revenue")
    for i in range(n):
        create(tools, name=f"BU {i}", orchestratorId="sigma" if i % 2 else "pi", status=statuses[i % 4])
    items, pages = page_all(tools, "list_bus", limit=8)
    assert len(items) == n and pages == 4 and len({i["_id"] for i in items}) == n
    assert [i["name"] for i in items] == [f"BU {i}" for i in reversed(range(n))]
    assert len(page_all(tools, "list_bus", orchestratorId="sigma", limit=3)[0]) == 15
    live, _ = page_all(tools, "list_bus", status="live", limit=2)
    assert len(live) == 8 and {b["status"] for b in live} == {"live"}
    assert len(page_all(tools, "list_bus", orchestratorId="pi", status="idea")[0]) == 8
    lite, _ = page_all(tools, "list_bus", fields="lite", limit=200)
    assert len(lite) == n and all(set(i) == {"_id", "_creationTime", "name", "status", "orchestratorId"} for i in lite)
    assert len(call(tools, "list_bus", {"limit": 0})["items"]) == 1  # clamped up to 1
    assert error(tools, "list_bus", {"status": "bankrupt"})


@pytest.mark.parametrize("over", [
    {"name": ""}, {"description": "   "}, {"orchestratorId": ""}, {"status": "zombie"}, {"managementFee": 101},
    {"managementFee": -1}, {"services": "not a list"}, {"services": [""]}, {"revenueProjections": ["A1"]},
    {"coreTeam": {"agents": "x" * 70_000}}, {"purpose": "\ud800"}, {"name": "n" * 600},
])
def test_bad_inputs_are_clean_errors(tools, over):
    assert error(tools, "create_bu", {**BU, **over})
    assert call(tools, "list_bus", {})["items"] == []


def test_hostile_strings_are_stored_verbatim(tools):
    nasty = "'; DROP TABLE businessUnits; -- \"(((NEAR( 🙂"
    bu = create(tools, name=nasty, description=nasty, pricing="x" * 20_000)
    assert call(tools, "get_bu", {"buId": bu["_id"]})["name"] == nasty
    assert page_all(tools, "list_bus", orchestratorId=nasty)[0] == []
