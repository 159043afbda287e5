"""Mandates: lifecycle, parties, and spending against the budget and limits.

Lifecycle: requested → accepted → in_progress → delivered → settled, one step at a time, except
that the requester may settle (close with the final cost) from accepted, in_progress or delivered.
Who moves it: the fulfiller accepts, starts and delivers; the requester settles; `system` may do
anything. Spending is recorded in `mandateSpending` (update_mandate `spend`) and `mandates.spent`
in the same transaction; validate_mandate_spending and recording use the same `evaluate`, so a
"yes" from validation is what recording would allow at that moment — except that recording, when
the mandate approves categories, also needs a category (validation checks one only when given).
"""

from __future__ import annotations

from typing import Any

from ...core import parties
from ...core.errors import InvalidArgument, InvalidState, VantageError
from ...core.ids import new_id, now_ms
from ...core.rbac import require_party
from ...db import Connection, Row, loads
from ...db.paging import to_doc
from ...db.table import Table

STATUSES = ("requested", "accepted", "in_progress", "delivered", "settled")
NEXT = {"requested": "accepted", "accepted": "in_progress", "in_progress": "delivered", "delivered": "settled"}
STAMP = {"accepted": "acceptedAt", "in_progress": "startedAt", "delivered": "deliveredAt", "settled": "settledAt"}
TERMS_OPEN = ("requested", "accepted", "in_progress")  # terms may change until delivery
SETTLE_FROM = ("accepted", "in_progress", "delivered")  # the seeds' flow settles right after accepting
SPEND_OPEN = ("accepted", "in_progress", "delivered")  # spending needs an accepted, unsettled mandate
DAY_MS = 86_400_000

MANDATES = Table(
    name="mandates", prefix="mdt", label="mandate", json_cols=("spendingLimits", "approvedCategories"),
    lite_keys=("_id", "_creationTime", "service", "status", "requestedBy", "fulfilledBy"),
)


def _n(value: float) -> int | float:
    """Tidy arithmetic results: 0.30000000000000004 -> 0.3, 5.0 -> 5."""
    value = round(value, 6)
    return int(value) if float(value).is_integer() else value


def create(conn: Connection, *, values: dict[str, Any]) -> dict[str, Any]:
    mandate_id = MANDATES.insert(conn, {**values, "status": "requested", "spent": 0})
    return MANDATES.get(conn, mandate_id)  # type: ignore[return-value]


def _mover(row: Row, target: str) -> tuple[list[str], str]:
    if target == "settled":
        return parties.names("mandate", row, "settle"), "the requester"
    return parties.names("mandate", row, "step"), "the fulfiller"


def transition(conn: Connection, row: Row, *, target: str, caller: str, extra: dict[str, Any] | None = None) -> None:
    """Move one legal step; RBAC first (who may make this move), then the state check."""
    parties, role = _mover(row, target)
    require_party(caller, parties, action=f"move mandate {row['id']} to {target}", role=role)
    current = row["status"]
    legal = current in SETTLE_FROM if target == "settled" else NEXT.get(current) == target
    if not legal:
        allowed = NEXT.get(current)
        hint = f"the only allowed next status is {allowed}" if allowed else "settled is final"
        if current in SETTLE_FROM:
            hint += " (or settled, through settle_mandate)"
        raise InvalidState(f"mandate {row['id']} is {current}; it cannot move to {target} ({hint})")
    now = now_ms()
    changed = MANDATES.patch(
        conn, row["id"], {"status": target, STAMP[target]: now, "updatedBy": caller, **(extra or {})},
        now=now, where="status = ?", params=[current],
    )
    if not changed:  # unreachable under BEGIN IMMEDIATE; kept as a compare-and-set guard
        raise InvalidState(f"mandate {row['id']} changed status meanwhile; read it again")


def evaluate(conn: Connection, row: Row, *, amount: int | float, category: str | None,
             strict_category: bool = False, now: int | None = None) -> tuple[dict[str, Any], bool]:
    """Would spending `amount` now be within this mandate? The verdict with reasons and what remains,
    and whether a refusal is about the mandate's state (rather than its limits)."""
    now = now or now_ms()
    limits = loads(row["spendingLimits"]) or {}
    categories = loads(row["approvedCategories"]) or []
    state_reasons, limit_reasons = [], []
    if row["status"] == "requested":
        state_reasons.append("the mandate is still requested: the fulfiller must accept_mandate before spending")
    elif row["status"] == "settled":
        state_reasons.append("the mandate is settled: no more spending can be recorded")
    remaining_budget = _n(row["budget"] - row["spent"])
    out: dict[str, Any] = {
        "mandateId": row["id"], "status": row["status"], "proposedAmount": amount, "budget": row["budget"],
        "spent": row["spent"], "remainingBudget": remaining_budget,
    }
    if amount > remaining_budget:
        limit_reasons.append(f"proposedAmount {amount} exceeds the remaining budget {remaining_budget} "
                             f"(budget {row['budget']}, spent {row['spent']})")
    per_tx = limits.get("maxPerTransaction")
    if per_tx is not None:
        out["maxPerTransaction"] = per_tx
        if amount > per_tx:
            limit_reasons.append(f"proposedAmount {amount} exceeds maxPerTransaction {per_tx}")
    per_period, days = limits.get("maxPerPeriod"), limits.get("periodDays")
    if per_period is not None and days is not None:
        since = now - int(days * DAY_MS)
        in_period = conn.scalar(
            "SELECT coalesce(sum(amount), 0) FROM mandateSpending WHERE mandateId = ? AND createdAt > ?",
            (row["id"], since),
        )
        remaining_period = _n(per_period - in_period)
        out.update(maxPerPeriod=per_period, periodDays=days, periodStart=since, spentInPeriod=_n(in_period),
                   remainingInPeriod=remaining_period)
        if amount > remaining_period:
            limit_reasons.append(f"proposedAmount {amount} exceeds what remains of maxPerPeriod {per_period} "
                                 f"over the last {days} days ({remaining_period}; {_n(in_period)} spent)")
    if categories:
        out["approvedCategories"] = categories
        folded = {c.casefold() for c in categories}
        if category is not None and category.casefold() not in folded:
            limit_reasons.append(f"category {category!r} is not one of the approvedCategories {categories}")
        elif category is None and strict_category:
            limit_reasons.append(f"category is required to record spending; one of {categories}")
    if category is not None:
        out["category"] = category
    reasons = state_reasons + limit_reasons
    out["allowed"] = not reasons
    out["reason"] = reasons[0] if reasons else "within the mandate's budget and limits"
    if reasons:
        out["reasons"] = reasons
    else:
        out["remainingBudgetAfter"] = _n(remaining_budget - amount)
        if "remainingInPeriod" in out:
            out["remainingInPeriodAfter"] = _n(out["remainingInPeriod"] - amount)
    return out, bool(state_reasons)


def record_spend(conn: Connection, row: Row, *, caller: str, amount: int | float, category: str | None,
                 note: str | None) -> dict[str, Any]:
    verdict, about_state = evaluate(conn, row, amount=amount, category=category, strict_category=True)
    if not verdict["allowed"]:
        if about_state:
            raise InvalidState(verdict["reason"])
        raise VantageError("; ".join(verdict["reasons"]), code="SPENDING_DENIED")
    now = now_ms()
    conn.execute(
        "INSERT INTO mandateSpending (id, mandateId, amount, category, note, recordedBy, createdAt) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (new_id("msp"), row["id"], amount, category, note, caller, now),
    )
    # Rounded like every amount we report (6 decimals), so 0.1 + 0.2 is stored as 0.3.
    conn.execute("UPDATE mandates SET spent = round(CAST(spent + ? AS NUMERIC), 6), updatedAt = ?, updatedBy = ? WHERE id = ?",
                 (amount, now, caller, row["id"]))
    return verdict


def update(conn: Connection, *, mandate_id: str, caller: str, terms: dict[str, Any], spend: dict[str, Any] | None,
           status: str | None) -> dict[str, Any]:
    """Terms (requester), then spending (either party), then a status step (fulfiller); one transaction."""
    row = MANDATES.require(conn, mandate_id)
    require_party(caller, parties.names("mandate", row, "change"), action=f"update mandate {mandate_id}",
                  role="a party to the mandate")
    if terms:
        require_party(caller, parties.names("mandate", row, "terms"), action=f"change the terms of mandate {mandate_id}",
                      role="the requester")
        if row["status"] not in TERMS_OPEN:
            raise InvalidState(f"mandate {mandate_id} is {row['status']}; terms can change only while "
                               f"{', '.join(TERMS_OPEN)}")
        MANDATES.patch(conn, mandate_id, {**terms, "updatedBy": caller})
        row = MANDATES.require(conn, mandate_id)
    if spend is not None:
        if row["status"] not in SPEND_OPEN:
            raise InvalidState(f"mandate {mandate_id} is {row['status']}; spending can be recorded only while "
                               f"{', '.join(SPEND_OPEN)}")
        record_spend(conn, row, caller=caller, **spend)
        row = MANDATES.require(conn, mandate_id)
    if status is not None:
        if status == "settled":
            raise InvalidArgument("status settled is set by settle_mandate (it records finalCost)")
        if status != row["status"]:
            transition(conn, row, target=status, caller=caller)
    return MANDATES.get(conn, mandate_id)  # type: ignore[return-value]


def get(conn: Connection, mandate_id: str, *, include_spending: bool) -> dict[str, Any] | None:
    doc = MANDATES.get(conn, mandate_id)
    if doc is not None and include_spending:
        rows = conn.query("SELECT * FROM mandateSpending WHERE mandateId = ? ORDER BY createdAt DESC, id DESC "
                          "LIMIT 200", (mandate_id,))
        # Documents like every other: `_id`, `_creationTime`, no nulls (the mandate id is the parent's).
        doc["spending"] = [{k: v for k, v in to_doc(r).items() if k != "mandateId"} for r in rows]
    return doc
