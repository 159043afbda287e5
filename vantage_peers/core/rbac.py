"""Who may act on a record: the one rule every ownership check uses.

A record names its parties (creator, assignee, pilot, recipient, sender, owner …). An actor may act
when it is one of them, or `system`, or the master bearer. An actor whose identity is unknown (a
local stdio server with no VP_ORCHESTRATOR and no identity argument) is trusted, as documented
("when an optional caller is absent, no RBAC check is made"); over HTTP the identity always comes
from the token, so a token never reaches this rule without one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from . import parties
from .errors import Forbidden
from .parties import SYSTEM


@dataclass(frozen=True)
class Actor:
    """The caller of one tool call, resolved once by the call pipeline.

    `identity` is who the call acts as (None: unknown, local trust). `acts_as` is what the
    credential may act as: None for local processes and the master bearer (any), else the token
    profile's allow-list, so a token with several identities may act on a record of any of them.
    """

    identity: str | None = None
    instance: str | None = None
    acts_as: tuple[str, ...] | None = None
    master: bool = False
    profile: str | None = None

    @property
    def privileged(self) -> bool:
        return self.master or self.identity == SYSTEM

    def candidates(self) -> tuple[str, ...] | None:
        """Identities this call may stand for; None = unknown (local trust)."""
        if self.identity is not None:
            return (self.identity,)
        if self.acts_as is not None and "*" not in self.acts_as:
            return self.acts_as
        return None

    def is_party(self, parties: Iterable[str | None]) -> bool:
        if self.privileged:
            return True
        who = self.candidates()
        if who is None:
            return True
        return any(p in who for p in parties if p)


def require(actor: Actor | str | None, parties: Mapping[str, str | tuple[str, ...] | None] | Iterable[str | None],
            *, action: str, what: str, hint: str | None = None) -> None:
    """Refuse with RBAC_DENIED naming who may act, unless `actor` is a party, `system` or master.

    `parties` maps a role ("creator") to the orchestrator holding it, or is a plain list of names.
    `actor` may be a bare identity string (store rules that get the caller as an argument).
    """
    if not isinstance(actor, Actor):
        actor = Actor(identity=actor)
    named = dict(parties) if isinstance(parties, Mapping) else {f"party {i}": p for i, p in enumerate(parties)}
    # A role may be held by several orchestrators (the members of a pool): a tuple of names.
    names = [n for who in named.values() for n in (who if isinstance(who, tuple) else (who,))]
    if actor.is_party(names):
        return
    roles = [f"its {role} ({', '.join(who) if isinstance(who, tuple) else who})" if not role.startswith("party ")
             else who for role, who in named.items() if who and who != SYSTEM and not str(who).startswith("pool:")]
    roles = list(dict.fromkeys(roles))
    allowed = ", ".join(roles + [SYSTEM]) if roles else SYSTEM
    who = actor.identity or " / ".join(actor.acts_as or ()) or "this caller"
    raise Forbidden(f"{who} may not {action} {what}: only {allowed} may" + (f"; {hint}" if hint else ""))


def require_record(actor: Actor | str | None, kind: str, row: Mapping[str, Any], verb: str, *, action: str,
                   what: str, hint: str | None = None) -> None:
    """`require` with the parties the declaration (core/parties.py) gives `verb` on this `kind` of record."""
    require(actor, parties.of(kind, row, verb), action=action, what=what, hint=hint)


def require_party(caller: Actor | str | None, names: Iterable[str | None], *, action: str, role: str) -> None:
    """`require` for rules phrased by role ("its lead orchestrator or creator"): the same check, the
    refusal worded `<action>: only <role> (<names> or system) may do this`. `names`: from the
    declaration, `parties.names(kind, row, verb)`."""
    actor = caller if isinstance(caller, Actor) else Actor(identity=caller)
    allowed = list(dict.fromkeys(p for p in names if p and p != SYSTEM))  # a lead who is also creator: once
    if actor.is_party(allowed):
        return
    names = " or ".join(allowed + [SYSTEM])
    raise Forbidden(f"{action}: only {role} ({names}) may do this; callerOrchestrator is {actor.identity}")
