"""MCP tools for mandates."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ...app import App, check_name
from ...errors import InvalidArgument
from ...paging import Fields
from ...records import number, text, text_list
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

    @app.tool("write")
    def create_mandate(
        fulfilledBy: str,
        service: str,
        budget: float,
        requestedBy: str | None = None,
        spendingLimits: SpendingLimits | None = None,
        approvedCategories: list[str] | None = None,
    ) -> dict[str, Any]:
        """Request a service from another orchestrator with a token budget (status `requested`).

        `spendingLimits` = {maxPerTransaction?, maxPerPeriod?, periodDays?} and
        `approvedCategories` (e.g. ["seo","content"]) bound what update_mandate `spend` may record.
        Lifecycle: requested → accepted (fulfiller: accept_mandate) → in_progress → delivered
        (fulfiller: update_mandate status) → settled (requester: settle_mandate). `requestedBy`
        defaults to VP_ORCHESTRATOR. Returns the mandate.
        """
        requester = app.caller(requestedBy, "requestedBy")
        values = {"requestedBy": requester, "fulfilledBy": check_name(fulfilledBy, "fulfilledBy"),
                  **_terms(service, budget, spendingLimits, approvedCategories)}
        if "service" not in values:
            raise InvalidArgument("service is required")
        return db.write(lambda c: store.create(c, values=values))

    @app.tool("write")
    def accept_mandate(mandateId: str, callerOrchestrator: str | None = None) -> dict[str, Any]:
        """Accept a requested mandate (→ `accepted`); only the fulfiller (`fulfilledBy`) or `system` may.

        Refused with INVALID_STATE unless the mandate is `requested`. Returns the mandate.
        `callerOrchestrator` defaults to VP_ORCHESTRATOR.
        """
        caller = app.caller(callerOrchestrator, "callerOrchestrator")

        def run(c):
            store.transition(c, load(c, mandateId), target="accepted", caller=caller)
            return store.MANDATES.get(c, mandateId)

        return db.write(run)

    @app.tool("write")
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
        """Update a mandate: advance its status, change its terms, or record spending (parties only).

        - `status`: one step forward, by the fulfiller or `system` (accepted → in_progress →
          delivered); `settled` is settle_mandate's job. Illegal moves: INVALID_STATE.
        - terms (`service`, `budget`, `spendingLimits`, `approvedCategories`): the requester, until delivery.
        - `spend` = {amount, category?, note?}: records spending (either party; status accepted,
          in_progress or delivered), checked like validate_mandate_spending; over a limit it is
          refused with SPENDING_DENIED and nothing is recorded.
        Applied in that order (terms, spend, status) in one transaction. Returns the mandate.
        `callerOrchestrator` defaults to VP_ORCHESTRATOR.
        """
        caller = app.caller(callerOrchestrator, "callerOrchestrator")
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

    @app.tool("write")
    def settle_mandate(mandateId: str, finalCost: float, callerOrchestrator: str | None = None) -> dict[str, Any]:
        """Record the actual cost and close a delivered mandate (→ `settled`, final).

        Only the requester (`requestedBy`) or `system` may settle, from accepted, in_progress or delivered.
        Returns the mandate with `finalCost`, `settledAt` and `settledBy`. `callerOrchestrator`
        defaults to VP_ORCHESTRATOR.
        """
        caller = app.caller(callerOrchestrator, "callerOrchestrator")
        cost = number(finalCost, "finalCost")

        def run(c):
            store.transition(c, load(c, mandateId), target="settled", caller=caller,
                             extra={"finalCost": cost, "settledBy": caller})
            return store.MANDATES.get(c, mandateId)

        return db.write(run)

    @app.tool("read")
    def validate_mandate_spending(mandateId: str, proposedAmount: float, category: str | None = None) -> dict[str, Any]:
        """Check whether spending `proposedAmount` (optionally in `category`) is within a mandate's limits.

        Checks, against spending recorded with update_mandate `spend`: the mandate is accepted
        and not settled; remaining budget; `maxPerTransaction`; `maxPerPeriod` over the last
        `periodDays`; `category` in `approvedCategories` (when both are given; recording the spend
        will need a category when the mandate approves categories). Returns
        `{allowed, reason, reasons?, remainingBudget, remainingInPeriod?, …}`; nothing is recorded.
        """
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
        """List mandates newest first, by requester, fulfiller and/or status.

        Paged: `{items, nextCursor?}`; pass `nextCursor` back as `cursor` until it is absent.
        `limit` default 20, clamped to 1..200; `fields="lite"` = _id, _creationTime, service,
        status, requestedBy, fulfilledBy.
        """
        filters = {"requestedBy": requestedBy, "fulfilledBy": fulfilledBy, "status": status}
        return db.read(lambda c: store.MANDATES.page(c, filters=filters, limit=limit, cursor=cursor, fields=fields))

    @app.tool("read")
    def get_mandate(mandateId: str, includeSpending: bool = False) -> dict[str, Any] | None:
        """Fetch one mandate by id (null when it does not exist); `spent` is the recorded total.

        `includeSpending` adds `spending`: the recorded transactions, newest first (at most 200).
        """
        return db.read(lambda c: store.get(c, mandateId, include_spending=includeSpending))

