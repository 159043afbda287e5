"""Policies declared on each tool, and the code that applies them (called by calls.py only).

A tool says, in its registration, which argument names the acting orchestrator (`identity`),
which other arguments name orchestrators it acts for (`names`), which records an argument points
at and whose parties may act on them (`owns`), whether it is reserved for the master bearer
(`master_only`), open to credentials without an identity (`open`), and why a record id it takes
is deliberately not owner-checked (`shared`). The pipeline applies all of it the same way on
stdio and over HTTP; no tool body resolves its caller or checks ownership by hand.

The caller is resolved once: the explicit identity argument, else the token's identity (HTTP,
when its profile names exactly one orchestrator), else VP_ORCHESTRATOR.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core import parties, rbac
from ..core.errors import Forbidden, InvalidArgument, VantageError
from ..core.principal import Principal
from ..core.rbac import SYSTEM, Actor
from ..core.scopes import allows, within
from ..core.validators import check_name

# Arguments that, on a write, name an orchestrator the call acts as (checked against a token's
# fromAllowList) unless the tool lists them in `others` (they name someone else: a BU's owner).
IDENTITY_ARGS = ("from", "createdBy", "callerOrchestrator", "orchestrator", "orchestratorId", "requestedBy")


class ScopeForbidden(VantageError):
    """A credential's scope refuses the call (HTTP tokens): the agent cannot fix it by retrying."""

    code = "FORBIDDEN"


@dataclass(frozen=True)
class RecordInfo:
    """What the pipeline needs to know about one record: its parties by role, and its namespace."""

    parties: Mapping[str, str | tuple[str, ...] | None]
    namespace: str | None = None


# kind -> loader(conn, record_id) -> RecordInfo | None (None: no such record; the body answers)
Loader = Callable[[Any, str], RecordInfo | None]


@dataclass(frozen=True)
class Owns:
    """The record an argument points at (an id, or a list of ids), checked before the body.

    The roles that may act come from the record kind's declaration (core/parties.py: the verb its
    `tools` entry gives this tool). `unclaimed`: a role whose empty value opens the record to any
    caller (an unassigned task can be claimed by anyone). `action` words the refusal.
    """

    record: str
    arg: str
    action: str | None = None
    unclaimed: str | None = None
    hint: str | None = None  # what to do instead, appended to the refusal


@dataclass(frozen=True)
class Policy:
    kind: str
    identity: str | None = None
    identity_required: bool = True
    subject: str | None = None
    instance: str | None = None
    names: tuple[str, ...] = ()
    owns: tuple[Owns, ...] = ()
    master_only: str | None = None
    open: bool = False
    shared: str | None = None
    idempotent: bool = False
    params: frozenset[str] = field(default_factory=frozenset)
    quick: bool = False  # only local database work: may run on the event loop (calls.runner)

    @property
    def read_only(self) -> bool:
        return self.kind == "read"

    @property
    def namespaced(self) -> bool:
        return "namespace" in self.params or "memoryId" in self.params


def py(name: str) -> str:
    """The Python parameter behind a wire argument (`from` is `from_`)."""
    return name + "_" if keyword.iskeyword(name) else name


def declare(kind: str, params: set[str], *, identity: str | None, identity_required: bool, subject: str | None,
            instance: str | None,
            others: tuple[str, ...], owns: Owns | tuple[Owns, ...] | None, master_only: str | None, open: bool,
            shared: str | None, idempotent: bool, quick: bool = False) -> Policy:
    owned = (owns,) if isinstance(owns, Owns) else tuple(owns or ())
    for name in [identity, subject, instance, *(o.arg for o in owned)]:
        if name is not None and name not in params:
            raise TypeError(f"policy names argument {name!r}, which the tool does not take")
    names = () if kind == "read" else tuple(
        a for a in IDENTITY_ARGS if a in params and a != identity and a not in others)
    return Policy(kind, identity, identity_required, subject, instance, names, owned, master_only, open, shared,
                  idempotent, frozenset(params), quick)


# -- the caller -------------------------------------------------------------------------------------
def _token_identities(p: Principal) -> tuple[str, ...]:
    return tuple(a for a in p.profile.from_allow_list if a != SYSTEM)  # system: master only


def _checked_identity(p: Principal, tool: str, wire: str, value: Any) -> Any:
    """An identity argument over HTTP: omitted → the token's one identity; named → in its allow-list."""
    name = p.profile.profile_id
    allowed = _token_identities(p)
    if value is None or (isinstance(value, str) and not value.strip()):
        if "*" in allowed:
            return value
        if len(allowed) == 1:
            return allowed[0]
        if not allowed:
            raise ScopeForbidden(f"{tool}: profile {name} may not act as any orchestrator (empty fromAllowList)")
        raise ScopeForbidden(f"{tool}: pass {wire} explicitly; profile {name} may act as {list(allowed)}")
    if not isinstance(value, str):
        return value  # the tool's own validation names the wrong type
    who = value.strip()
    if who == SYSTEM:
        raise ScopeForbidden(f"{tool}: {wire}='system' is honoured only for the master bearer (profile {name})")
    if "*" not in allowed and who not in allowed:
        raise ScopeForbidden(f"{tool}: profile {name} may not act as {who!r} ({wire}; fromAllowList: "
                             f"{list(allowed)})")
    return value


def default_identity(principal: Principal | None, orchestrator: str | None) -> str | None:
    """Who a call acts as when no argument says: the token's one identity, else VP_ORCHESTRATOR."""
    if principal is not None and not principal.is_master:
        allowed = _token_identities(principal)
        if len(allowed) == 1 and allowed[0] != "*":
            return allowed[0]
        return None
    return orchestrator


def presence_of(principal: Principal | None, settings: Any) -> tuple[str | None, str | None]:
    """Whose presence a call refreshes: the token's one identity over HTTP, else this process's
    VP_ORCHESTRATOR with its VP_INSTANCE_ID; never an orchestrator merely named by an argument."""
    who = default_identity(principal, settings.orchestrator)
    return who, settings.instance_id if who is not None and who == settings.orchestrator else None


def _required(field: str) -> InvalidArgument:
    return InvalidArgument(f"{field} is required (or start the server with VP_ORCHESTRATOR set to your "
                           "orchestrator id)")


def resolve(tool: str, policy: Policy, kwargs: dict[str, Any], principal: Principal | None,
            settings: Any) -> tuple[Actor, dict[str, Any]]:
    """Apply the credential's scope and the identity rules; returns the actor and the arguments with
    the identity (and instance) filled in. Namespace rules are applied by `namespaces` below."""
    scoped = principal is not None and not principal.is_master
    out = dict(kwargs)
    if scoped:
        name = principal.profile.profile_id
        if policy.master_only:
            raise ScopeForbidden(f"{tool} is reserved for the master bearer over HTTP ({policy.master_only}); "
                                 f"profile {name} may not call it")
        if not policy.namespaced and not policy.open and not principal.profile.from_allow_list:
            raise ScopeForbidden(f"profile {name} has no orchestrator identity (empty fromAllowList): it may "
                                 f"only read namespaces within its prefixes, so {tool} is refused; ask an "
                                 "operator to elevate the client")
        for wire in ((policy.identity,) if policy.identity else ()) + policy.names:
            out[py(wire)] = _checked_identity(principal, tool, wire, out.get(py(wire)))
    identity: str | None
    if policy.identity is not None:
        value = out.get(py(policy.identity))
        if value is None or value == "":
            value = settings.orchestrator
        if value is None:
            if policy.identity_required:
                raise _required(policy.identity)
            identity = None
        else:
            identity = check_name(value, policy.identity)
        out[py(policy.identity)] = identity
    else:
        identity = default_identity(principal, settings.orchestrator)
    if policy.subject is not None:
        # Whose records a read is about: anyone's (team records are shared), by default the caller's.
        value = out.get(py(policy.subject))
        if value is None or value == "":
            value = identity
        if value is None:
            raise _required(policy.subject)
        out[py(policy.subject)] = check_name(value, policy.subject)
    instance = None
    if policy.instance is not None:
        value = out.get(py(policy.instance))
        if value is None or value == "":
            # This server's instance is never lent to another orchestrator acted for explicitly.
            instance = settings.instance_id if identity is None or identity == settings.orchestrator else None
        else:
            instance = check_name(value, policy.instance)
        out[py(policy.instance)] = instance
    elif identity is not None and identity == settings.orchestrator:
        instance = settings.instance_id
    actor = Actor(identity=identity, instance=instance,
                  acts_as=_token_identities(principal) if scoped else None,
                  master=principal is not None and principal.is_master,
                  profile=principal.profile.profile_id if principal is not None else None)
    return actor, out


# -- namespaces (scoped tokens) ------------------------------------------------------------------------
def namespaces(tool: str, policy: Policy, kwargs: dict[str, Any], principal: Principal | None,
               namespace_of: Callable[[str], str | None]) -> None:
    """Reads need a namespaceReadPrefixes match, writes a namespaceWritePrefixes match; `global` is
    never written by a token. Lists with no (or a wildcard) namespace run, narrowed by the store."""
    if principal is None or principal.is_master or not policy.namespaced:
        return
    p, read_only = principal.profile, policy.read_only
    name = p.profile_id
    ns = kwargs.get("namespace")
    if read_only and not p.read_prefixes:
        raise ScopeForbidden(f"profile {name} may read no namespace (empty namespaceReadPrefixes)")
    if isinstance(ns, str) and ns not in ("", "*"):
        exact = ns[:-2] if ns.endswith("/*") else ns
        if read_only:
            if not ns.endswith("/*") and not allows(p.read_prefixes, exact):
                raise ScopeForbidden(f"profile {name} may not read namespace {ns!r} "
                                     f"(namespaceReadPrefixes: {list(p.read_prefixes)})")
        else:
            _writable(principal, ns)
    memory_id = kwargs.get("memoryId")
    if isinstance(memory_id, str):
        target = namespace_of(memory_id)
        if target is not None:
            if read_only and not allows(p.read_prefixes, target):
                raise ScopeForbidden(f"profile {name} may not read namespace {target!r} (memory {memory_id})")
            if not read_only:
                _writable(principal, target)
    edges = list(kwargs.get("relations") or []) + ([kwargs["relatesTo"]] if kwargs.get("relatesTo") else [])
    for edge in edges:
        target_id = getattr(edge, "targetId", None) or (edge.get("targetId") if isinstance(edge, dict) else None)
        kind = getattr(edge, "type", None) or (edge.get("type") if isinstance(edge, dict) else None)
        target = namespace_of(target_id) if isinstance(target_id, str) else None
        if target is None:
            continue
        if kind == "updates":  # archives the target: a write to its namespace
            _writable(principal, target)
        elif not allows(p.read_prefixes, target):
            raise ScopeForbidden(f"profile {name} may not read namespace {target!r} (relation target {target_id})")


def _writable(principal: Principal, ns: str) -> None:
    name = principal.profile.profile_id
    if within(ns, "global"):
        raise ScopeForbidden(f"namespace {ns!r} is read-only for every token but the master bearer "
                             f"(profile {name})")
    if "*" in ns or not allows(principal.profile.write_prefixes, ns):
        raise ScopeForbidden(f"profile {name} may not write namespace {ns!r} "
                             f"(namespaceWritePrefixes: {list(principal.profile.write_prefixes)})")


def identities_of(principal: Principal | None) -> tuple[str, ...] | None:
    """Whom a credential may act as: None = anyone (a local process, the master bearer, a token
    whose fromAllowList holds `*`), else its identities (without `system`)."""
    if principal is None or principal.is_master:
        return None
    who = _token_identities(principal)
    return None if "*" in who else who


def readers_of(principal: Principal | None) -> tuple[str, ...] | None:
    """Whose messages and tasks a credential reads (docs/policy.md, "Who reads what"): None = all
    (anyone `identities_of` says may act as anyone, or a profile with recordReadScope `team`), else
    its identities."""
    if principal is not None and principal.profile.record_read == "team":
        return None
    return identities_of(principal)


PERSONAL_URI = re.compile(r"^vp://(inbox|tasks)/([^/?#]+)$")


def personal_denial(principal: Principal | None, uri: str) -> str | None:
    """Why a credential may not read (or subscribe to) a personal resource — an inbox, a task queue —
    of another identity, or None (#32: a token acting as alice never reads vp://inbox/bob)."""
    m = PERSONAL_URI.match(uri)
    readers = identities_of(principal)  # personal: recordReadScope `team` does not open another's inbox
    if m is None or readers is None or m.group(2) in readers:
        return None
    assert principal is not None
    return (f"FORBIDDEN: profile {principal.profile.profile_id} may not read the {m.group(1)} of {m.group(2)!r}: "
            f"it reads only its own ({', '.join(readers) or 'no identity'})")


def read_prefixes(principal: Principal | None) -> tuple[str, ...] | None:
    """The namespaces a call may read; None = all (stdio, master)."""
    if principal is None or principal.is_master:
        return None
    return principal.profile.read_prefixes


# -- record ownership -------------------------------------------------------------------------------
def owners(tool: str, policy: Policy, kwargs: dict[str, Any], actor: Actor, conn: Any,
           loaders: Mapping[str, Loader]) -> None:
    """Every record an `owns` argument points at: the actor must hold one of the declared roles."""
    for rule in policy.owns:
        value = kwargs.get(py(rule.arg))
        ids = value if isinstance(value, list | tuple) else [value]
        load = loaders[rule.record]
        for record_id in ids:
            if not isinstance(record_id, str):
                continue
            info = load(conn, record_id)
            if info is None:
                continue  # the body answers NOT_FOUND (or null) as it always has
            if rule.unclaimed is not None and not info.parties.get(rule.unclaimed):
                continue
            roles = parties.kind(rule.record).roles(verb_of(tool, rule))
            rbac.require(actor, {role: info.parties.get(role) for role in roles}, action=rule.action or tool.replace("_", " "),
                         what=f"{rule.record} {record_id}", hint=rule.hint)


def verb_of(tool: str, rule: Owns) -> str:
    """The verb the declaration of `rule.record` gives `tool` on `rule.arg` (core/parties.py)."""
    arg, verb = parties.kind(rule.record).tools.get(tool, (None, ""))
    if arg != rule.arg:
        raise TypeError(f"{tool}: owns={rule.record!r} on {rule.arg!r} is not declared in core/parties.py "
                        f"(KINDS[{rule.record!r}].tools)")
    return verb


__all__ = ["Forbidden", "Owns", "Policy", "RecordInfo", "ScopeForbidden", "declare", "declared_loader", "owners",
           "resolve", "resolve_prompt", "resolve_resource", "row_loader"]


def row_loader(table: str, key: str, roles: Mapping[str, str], *, namespace: str | None = None,
               columns: str | None = None) -> Loader:
    """A loader reading one row's party columns (table and columns are code constants, never input)."""
    columns = columns or ", ".join(dict.fromkeys([*roles.values(), *([namespace] if namespace else [])]))

    def load(conn: Any, record_id: str) -> RecordInfo | None:
        row = conn.one(f"SELECT {columns} FROM {table} WHERE {key} = ?", (record_id,))
        if row is None:
            return None
        return RecordInfo({role: row[col] for role, col in roles.items()}, row[namespace] if namespace else None)

    return load


def declared_loader(kind: str) -> Loader:
    """The loader of a record kind whose parties are columns of one table (core/parties.py)."""
    k = parties.kind(kind)
    if k.table is None or k.key is None:
        raise TypeError(f"record kind {kind!r} has no table of its own: register its loader by hand")
    return row_loader(k.table, k.key, parties.columns(kind), namespace=k.namespace)


# -- resources and prompts: the same resolution as a tool call ---------------------------------------
# A resource read is a read of the team's records (`vp://`, `ui://`): it needs an identity, like a tool
# that is neither namespaced nor open. A prompt is open (it only renders text naming the caller).
RESOURCE = Policy("read")
PROMPT = Policy("read", open=True)


def resolve_resource(uri: str, principal: Principal | None, settings: Any) -> Actor:
    """The caller of one resources/read: refused as a tool call with the same credential would be,
    and never another identity's inbox or task queue (personal_denial)."""
    actor, _ = resolve(f"resource {uri}", RESOURCE, {}, principal, settings)
    denial = personal_denial(principal, uri)
    if denial:
        raise ScopeForbidden(denial.removeprefix("FORBIDDEN: "))
    return actor


def resolve_prompt(name: str, principal: Principal | None, settings: Any) -> Actor:
    """Who a prompt is rendered for when no role argument names it."""
    return resolve(f"prompt {name}", PROMPT, {}, principal, settings)[0]
