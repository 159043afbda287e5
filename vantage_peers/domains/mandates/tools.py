"""MCP tools for mandates."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ...core.errors import InvalidArgument
from ...core.validators import check_name, number, text, text_list
from ...db.paging import Fields
from ...pipeline.app import App
from . import store

MandateStatus = Literal["requested", "accepted", "in_progress", "delivered", "settled"]


class SpendingLimits(BaseModel):
    """AP2 authorization limits; each optional, but maxPerPeriod and periodDays go together."""

    model_config = ConfigDict(extra="forbid")
    maxPerTransaction: float | None = None
    maxPerPeriod: float | None = None
    periodDays: float | None = None


class Spend(BaseModel):
    """A spending record: amount (> 0), category (required when the mandate approves categories), note."""

    model_config = ConfigDict(extra="forbid")
    amount: float
    category: str | None = None
    note: str | None = None


def _limits(value: SpendingLimits | None) -> dict[str, Any] | None:
    if value is None:
        return None
    out = {}
    for key in ("maxPerTransaction", "maxPerPeriod", "periodDays"):
        raw = getattr(value, key)
        if raw is not None:
            out[key] = number(raw, f"spendingLimits.{key}", positive=True)
    if ("maxPerPeriod" in out) != ("periodDays" in out):
        raise InvalidArgument("spendingLimits.maxPerPeriod and spendingLimits.periodDays must be given together")
    return out


def _terms(service: Any, budget: Any, limits: SpendingLimits | None, categories: Any) -> dict[str, Any]:
    return {
        k: v for k, v in {
            "service": text(service, "service", max_bytes=20_000, required=False),
            "budget": number(budget, "budget", required=False),
            "spendingLimits": _limits(limits),
            "approvedCategories": text_list(categories, "approvedCategories", max_bytes=200),
        }.items() if v is not None
    }


def register(app: App) -> None:
    db = app.db

    def load(c, mandate_id: str):
        return store.MANDATES.require(c, mandate_id)

    @app.tool("write", identity="requestedBy", idempotent=True)
    def create_mandate(
        fulfilledBy: str,
        service: str,
        budget: float,
        requestedBy: str | None = None,
        spendingLimits: SpendingLimits | None = None,
        approvedCategories: list[str] | None = None,
    ) -> dict[str, Any]:
        """Request a service from another orchestrator with a token budget; returns the mandate.

        Then accept_mandate (fulfiller), settle_mandate (requester).
        """
        requester = requestedBy
        values = {"requestedBy": requester, "fulfilledBy": check_name(fulfilledBy, "fulfilledBy"),
                  **_terms(service, budget, spendingLimits, approvedCategories)}
        if "service" not in values:
            raise InvalidArgument("service is required")
        return db.write(lambda c: store.create(c, values=values))

    @app.tool("write", identity="callerOrchestrator")
    def accept_mandate(mandateId: str, callerOrchestrator: str | None = None) -> dict[str, Any]:
        """Accept a requested mandate (fulfiller or `system`); returns it."""
        caller = callerOrchestrator

        def run(c):
            store.transition(c, load(c, mandateId), target="accepted", caller=caller)
            return store.MANDATES.get(c, mandateId)

        return db.write(run)

    @app.tool("write", identity="callerOrchestrator")
    def update_mandate(
        mandateId: str,
        callerOrchestrator: str | None = None,
        status: MandateStatus | None = None,
        service: str | None = None,
        budget: float | None = None,
        spendingLimits: SpendingLimits | None = None,
        approvedCategories: list[str] | None = None,
        spend: Spend | None = None,
    ) -> dict[str, Any]:
        """Update a mandate: one status step, its terms, or a `spend`; returns it.

        Status steps (accepted → in_progress → delivered) are the fulfiller's, terms the requester's until delivery; `spend`: either party (SPENDING_DENIED over a limit).
        """
        caller = callerOrchestrator
        terms = _terms(service, budget, spendingLimits, approvedCategories)
        record = None
        if spend is not None:
            record = {"amount": number(spend.amount, "spend.amount", positive=True),
                      "category": text(spend.category, "spend.category", required=False, max_bytes=200),
                      "note": text(spend.note, "spend.note", required=False, max_bytes=2_000)}
        if not terms and record is None and status is None:
            raise InvalidArgument("nothing to update: pass status, service, budget, spendingLimits, "
                                  "approvedCategories or spend")
        return db.write(
            lambda c: store.update(c, mandate_id=mandateId, caller=caller, terms=terms, spend=record, status=status)
        )

    @app.tool("write", identity="callerOrchestrator")
    def settle_mandate(mandateId: str, finalCost: float, callerOrchestrator: str | None = None) -> dict[str, Any]:
        """Close a mandate with its final cost (requester or `system`); returns it."""
        caller = callerOrchestrator
        cost = number(finalCost, "finalCost")

        def run(c):
            store.transition(c, load(c, mandateId), target="settled", caller=caller,
                             extra={"finalCost": cost, "settledBy": caller})
            return store.MANDATES.get(c, mandateId)

        return db.write(run)

    @app.tool("read")
    def validate_mandate_spending(mandateId: str, proposedAmount: float, category: str | None = None) -> dict[str, Any]:
        """Check whether `proposedAmount` (in `category`) fits a mandate's limits; returns `{allowed, reason}`."""
        amount = number(proposedAmount, "proposedAmount", positive=True)
        label = text(category, "category", required=False, max_bytes=200)

        def run(c):
            verdict, _ = store.evaluate(c, load(c, mandateId), amount=amount, category=label)
            return verdict

        return db.read(run)

    @app.tool("read")
    def list_mandates(
        requestedBy: str | None = None,
        fulfilledBy: str | None = None,
        status: MandateStatus | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        fields: Fields = "full",
    ) -> dict[str, Any]:
        """List mandates newest first, by requester, fulfiller and/or status."""
        filters = {"requestedBy": requestedBy, "fulfilledBy": fulfilledBy, "status": status}
        return db.read(lambda c: store.MANDATES.page(c, filters=filters, limit=limit, cursor=cursor, fields=fields))

    @app.tool("read")
    def get_mandate(mandateId: str, includeSpending: bool = False) -> dict[str, Any] | None:
        """Fetch a mandate (`spent` = recorded total); `includeSpending` adds the transactions."""
        return db.read(lambda c: store.get(c, mandateId, include_spending=includeSpending))

