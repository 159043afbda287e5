"""Mandates: lifecycle, party RBAC, spending validation and recording, paging, hostile input."""

from __future__ import annotations

import pytest
from support.records_helpers import page_all

from vantage_peers.domains.mandates import store

pytestmark = pytest.mark.backends

LIMITS = {"maxPerTransaction": 50_000, "maxPerPeriod": 200_000, "periodDays": 30}


def mandate(tools, **over):
    args = {"requestedBy": "bob", "fulfilledBy": "alice", "service": "Build landing page", "budget": 100_000, **over}
    return tools.call("create_mandate", **args)


def advance(tools, mandate_id, to):
    """Walk a mandate forward to status `to` with the right parties."""
    steps = ["accepted", "in_progress", "delivered", "settled"]
    for step in steps[: steps.index(to) + 1]:
        if step == "accepted":
            tools.call("accept_mandate", mandateId=mandate_id, callerOrchestrator="alice")
        elif step == "settled":
            tools.call("settle_mandate", mandateId=mandate_id, callerOrchestrator="bob", finalCost=85_000)
        else:
            tools.call("update_mandate", mandateId=mandate_id, callerOrchestrator="alice", status=step)


def test_full_lifecycle(tools):
    m = mandate(tools, spendingLimits=LIMITS, approvedCategories=["seo", "content"])
    assert m["status"] == "requested" and m["spent"] == 0 and m["budget"] == 100_000
    assert m["spendingLimits"] == LIMITS and m["_id"].startswith("mdt_")
    accepted = tools.call("accept_mandate", mandateId=m["_id"], callerOrchestrator="alice")
    assert accepted["status"] == "accepted" and "acceptedAt" in accepted
    started = tools.call("update_mandate", mandateId=m["_id"], callerOrchestrator="alice", status="in_progress")
    assert started["status"] == "in_progress" and "startedAt" in started
    done = tools.call("update_mandate", mandateId=m["_id"], callerOrchestrator="system", status="delivered")
    assert done["status"] == "delivered" and "deliveredAt" in done
    settled = tools.call("settle_mandate", mandateId=m["_id"], callerOrchestrator="bob", finalCost=85_000)
    assert settled["status"] == "settled" and settled["finalCost"] == 85_000 and settled["settledBy"] == "bob"
    assert tools.call("get_mandate", mandateId=m["_id"]) == settled
    assert tools.call("get_mandate", mandateId="mdt_missing") is None


@pytest.mark.parametrize("status", ["accepted", "in_progress", "delivered"])
def test_requester_settles_from_any_accepted_state(tools, status):
    """The seeds' flow: accept_mandate, then settle_mandate with the final cost (issue 10)."""
    m = mandate(tools)
    advance(tools, m["_id"], status)
    settled = tools.call("settle_mandate", mandateId=m["_id"], callerOrchestrator="bob", finalCost=12)
    assert settled["status"] == "settled" and settled["finalCost"] == 12 and settled["settledAt"]
    assert "final" in tools.error("settle_mandate", mandateId=m["_id"], callerOrchestrator="bob", finalCost=13)


@pytest.mark.parametrize("status,tool,args,allowed", [
    ("requested", "update_mandate", {"status": "in_progress", "callerOrchestrator": "alice"}, "accepted"),
    ("requested", "settle_mandate", {"finalCost": 1, "callerOrchestrator": "bob"}, "accepted"),
    ("accepted", "accept_mandate", {"callerOrchestrator": "alice"}, "in_progress"),
    ("accepted", "update_mandate", {"status": "delivered", "callerOrchestrator": "alice"}, "in_progress"),
    ("in_progress", "update_mandate", {"status": "accepted", "callerOrchestrator": "alice"}, "delivered"),
    ("delivered", "update_mandate", {"status": "in_progress", "callerOrchestrator": "alice"}, "settled"),
    ("settled", "accept_mandate", {"callerOrchestrator": "alice"}, "final"),
    ("settled", "settle_mandate", {"finalCost": 2, "callerOrchestrator": "bob"}, "final"),
    ("settled", "update_mandate", {"status": "delivered", "callerOrchestrator": "alice"}, "final"),
])
def test_illegal_transitions_name_the_allowed_next_state(tools, status, tool, args, allowed):
    m = mandate(tools)
    if status != "requested":
        advance(tools, m["_id"], status)
    msg = tools.error(tool, mandateId=m["_id"], **args)
    assert "INVALID_STATE" in msg and allowed in msg
    assert tools.call("get_mandate", mandateId=m["_id"])["status"] == status


def test_settle_through_update_is_refused(tools):
    m = mandate(tools)
    advance(tools, m["_id"], "delivered")
    assert "settle_mandate" in tools.error("update_mandate", mandateId=m["_id"], callerOrchestrator="bob",
                                           status="settled")


@pytest.mark.parametrize("tool,args", [
    ("accept_mandate", {"callerOrchestrator": "bob"}),  # the requester cannot accept for the fulfiller
    ("accept_mandate", {"callerOrchestrator": "mallory"}),
    ("update_mandate", {"callerOrchestrator": "mallory", "status": "accepted"}),
    ("update_mandate", {"callerOrchestrator": "mallory", "budget": 1}),
    ("update_mandate", {"callerOrchestrator": "alice", "budget": 1}),  # terms belong to the requester
    ("update_mandate", {"callerOrchestrator": "mallory", "spend": {"amount": 1}}),
    ("settle_mandate", {"callerOrchestrator": "alice", "finalCost": 1}),
    ("settle_mandate", {"callerOrchestrator": "mallory", "finalCost": 1}),
])
def test_non_parties_are_refused(tools, tool, args):
    m = mandate(tools)
    msg = tools.error(tool, mandateId=m["_id"], **args)
    assert "RBAC_DENIED" in msg
    after = tools.call("get_mandate", mandateId=m["_id"])
    assert after["status"] == "requested" and after["budget"] == 100_000 and after["spent"] == 0


def test_caller_is_required(tools):
    m = mandate(tools)
    for tool, extra in (("accept_mandate", {}), ("update_mandate", {"status": "accepted"}),
                        ("settle_mandate", {"finalCost": 1})):
        assert "callerOrchestrator is required" in tools.error(tool, mandateId=m["_id"], **extra)


def test_requester_changes_terms_until_delivery(tools):
    m = mandate(tools)
    up = tools.call("update_mandate", mandateId=m["_id"], callerOrchestrator="bob", budget=150_000,
                    service="Landing page + blog", spendingLimits={"maxPerTransaction": 10}, approvedCategories=["seo"])
    assert up["budget"] == 150_000 and up["service"] == "Landing page + blog"
    assert up["spendingLimits"] == {"maxPerTransaction": 10} and up["approvedCategories"] == ["seo"]
    advance(tools, m["_id"], "delivered")
    assert "INVALID_STATE" in tools.error("update_mandate", mandateId=m["_id"], callerOrchestrator="bob", budget=1)
    assert "nothing to update" in tools.error("update_mandate", mandateId=m["_id"], callerOrchestrator="bob")


def test_validate_spending_checks_every_limit(tools):
    m = mandate(tools, spendingLimits=LIMITS, approvedCategories=["seo", "content"], budget=300_000)
    v = tools.call("validate_mandate_spending", mandateId=m["_id"], proposedAmount=25_000)
    assert not v["allowed"] and "accept" in v["reason"]  # not accepted yet
    advance(tools, m["_id"], "accepted")
    v = tools.call("validate_mandate_spending", mandateId=m["_id"], proposedAmount=25_000)
    assert v["allowed"] and v["remainingBudget"] == 300_000 and v["remainingBudgetAfter"] == 275_000
    assert v["remainingInPeriod"] == 200_000 and v["remainingInPeriodAfter"] == 175_000
    v = tools.call("validate_mandate_spending", mandateId=m["_id"], proposedAmount=60_000)
    assert not v["allowed"] and "maxPerTransaction" in v["reason"]
    v = tools.call("validate_mandate_spending", mandateId=m["_id"], proposedAmount=10, category="ads")
    assert not v["allowed"] and "approvedCategories" in v["reason"]
    assert tools.call("validate_mandate_spending", mandateId=m["_id"], proposedAmount=10, category="SEO")["allowed"]
    for _ in range(4):
        tools.call("update_mandate", mandateId=m["_id"], callerOrchestrator="alice",
                   spend={"amount": 50_000, "category": "content", "note": "sprint"})
    v = tools.call("validate_mandate_spending", mandateId=m["_id"], proposedAmount=1)
    assert not v["allowed"] and "maxPerPeriod" in v["reason"] and v["spentInPeriod"] == 200_000
    assert v["remainingInPeriod"] == 0 and v["remainingBudget"] == 100_000
    got = tools.call("get_mandate", mandateId=m["_id"], includeSpending=True)
    assert got["spent"] == 200_000 and len(got["spending"]) == 4
    assert got["spending"][0]["recordedBy"] == "alice" and got["spending"][0]["category"] == "content"
    first = got["spending"][0]
    assert first["_id"].startswith("msp_") and first["_creationTime"] == first["createdAt"]
    assert not {"id", "seq", "mandateId"} & set(first)


def test_budget_is_a_hard_cap_and_refused_spending_records_nothing(tools):
    m = mandate(tools, budget=100)
    advance(tools, m["_id"], "in_progress")
    tools.call("update_mandate", mandateId=m["_id"], callerOrchestrator="bob", spend={"amount": 60})
    msg = tools.error("update_mandate", mandateId=m["_id"], callerOrchestrator="alice", spend={"amount": 41},
                      status="delivered")
    assert "SPENDING_DENIED" in msg and "remaining budget 40" in msg
    after = tools.call("get_mandate", mandateId=m["_id"], includeSpending=True)
    assert after["spent"] == 60 and len(after["spending"]) == 1 and after["status"] == "in_progress"  # one transaction
    v = tools.call("validate_mandate_spending", mandateId=m["_id"], proposedAmount=40)
    assert v["allowed"] and v["remainingBudgetAfter"] == 0


def test_spending_needs_category_when_categories_are_approved(tools):
    m = mandate(tools, approvedCategories=["seo"])
    advance(tools, m["_id"], "accepted")
    assert "category is required" in tools.error("update_mandate", mandateId=m["_id"], callerOrchestrator="alice",
                                                 spend={"amount": 5})
    tools.call("update_mandate", mandateId=m["_id"], callerOrchestrator="alice", spend={"amount": 5, "category": "seo"})


def test_spending_refused_before_acceptance_and_after_settlement(tools):
    m = mandate(tools)
    assert "INVALID_STATE" in tools.error("update_mandate", mandateId=m["_id"], callerOrchestrator="alice",
                                          spend={"amount": 1})
    advance(tools, m["_id"], "settled")
    assert "INVALID_STATE" in tools.error("update_mandate", mandateId=m["_id"], callerOrchestrator="alice",
                                          spend={"amount": 1})
    v = tools.call("validate_mandate_spending", mandateId=m["_id"], proposedAmount=1)
    assert not v["allowed"] and "settled" in v["reason"]


def test_fractional_amounts_stay_tidy(tools):
    m = mandate(tools, budget=1)
    advance(tools, m["_id"], "accepted")
    for _ in range(3):
        after = tools.call("update_mandate", mandateId=m["_id"], callerOrchestrator="alice", spend={"amount": 0.1})
    assert after["spent"] == 0.3  # not 0.30000000000000004
    assert tools.call("get_mandate", mandateId=m["_id"])["spent"] == 0.3
    v = tools.call("validate_mandate_spending", mandateId=m["_id"], proposedAmount=0.7)
    assert v["allowed"] and v["remainingBudget"] == 0.7 and v["remainingBudgetAfter"] == 0


@pytest.mark.parametrize("args", [
    {"budget": -1}, {"budget": 1e300}, {"service": "  "}, {"fulfilledBy": ""},
    {"spendingLimits": {"maxPerPeriod": 10}}, {"spendingLimits": {"maxPerTransaction": 0}},
    {"spendingLimits": {"periodDays": -3, "maxPerPeriod": 5}}, {"approvedCategories": [""]},
    {"spendingLimits": {"bogus": 1}}, {"budget": "lots"}, {"service": "é" * 20_000},
])
def test_bad_create_arguments_are_clean_errors(tools, args):
    msg = tools.error("create_mandate", **{"requestedBy": "bob", "fulfilledBy": "alice", "service": "s",
                                           "budget": 10, **args})
    assert msg
    assert tools.call("list_mandates")["items"] == []


def test_bad_amounts(tools):
    m = mandate(tools)
    for amount in (0, -5):
        assert "INVALID_ARGUMENT" in tools.error("validate_mandate_spending", mandateId=m["_id"], proposedAmount=amount)
    assert "NOT_FOUND" in tools.error("validate_mandate_spending", mandateId="'; DROP TABLE mandates", proposedAmount=1)
    assert "INVALID_ARGUMENT" in tools.error("settle_mandate", mandateId=m["_id"], callerOrchestrator="bob",
                                             finalCost=-1)


def test_list_mandates_insert_n_filters_cursor_lite(tools):
    n = 29
    for i in range(n):
        m = mandate(tools, requestedBy="bob" if i % 2 else "carol", service=f"job {i}")
        if i % 4 == 0:
            advance(tools, m["_id"], "accepted")
    items, pages = page_all(tools, "list_mandates", limit=6)
    assert len(items) == n and pages == 5 and len({i["_id"] for i in items}) == n
    assert len(page_all(tools, "list_mandates", requestedBy="bob", limit=4)[0]) == 14
    accepted, _ = page_all(tools, "list_mandates", status="accepted", limit=2)
    assert len(accepted) == 8 and {a["status"] for a in accepted} == {"accepted"}
    assert len(page_all(tools, "list_mandates", fulfilledBy="alice", status="requested")[0]) == 21
    assert page_all(tools, "list_mandates", fulfilledBy="nobody")[0] == []
    lite, _ = page_all(tools, "list_mandates", fields="lite", limit=200)
    keys = {"_id", "_creationTime", "service", "status", "requestedBy", "fulfilledBy"}
    assert len(lite) == n and all(set(i) == keys for i in lite)
    assert tools.error("list_mandates", status="cancelled")


def test_store_evaluate_on_a_file(db):
    m = db.write(lambda c: store.create(c, values={"requestedBy": "b", "fulfilledBy": "a", "service": "s",
                                                   "budget": 10, "spendingLimits": {"maxPerTransaction": 3}}))
    row = db.read(lambda c: store.MANDATES.require(c, m["_id"]))
    verdict, about_state = db.read(lambda c: store.evaluate(c, row, amount=4, category=None))
    assert about_state and len(verdict["reasons"]) == 2  # requested + per-transaction


def test_update_is_one_transaction(tools):
    m = mandate(tools)
    advance(tools, m["_id"], "accepted")
    # terms and spend are applied, then the status step is refused: everything rolls back
    msg = tools.error("update_mandate", mandateId=m["_id"], callerOrchestrator="bob", budget=5,
                      spend={"amount": 1}, status="in_progress")
    assert "RBAC_DENIED" in msg
    after = tools.call("get_mandate", mandateId=m["_id"], includeSpending=True)
    assert after["budget"] == 100_000 and after["spent"] == 0 and after["spending"] == []
    assert after["status"] == "accepted"
