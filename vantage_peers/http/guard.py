"""Scope enforcement for every tool call made over HTTP — the one place it happens (§30.5).

Registered with `app.add_guard`; it reads the call's principal (principal.py). No principal
(stdio, in-process) = local trust; the master bearer passes untouched. For any other token:

- Namespaced tools (a `namespace` argument, a `memoryId`, memory `relations`): reads need a
  `namespaceReadPrefixes` match, writes a `namespaceWritePrefixes` match, and `global` is never
  written. Searches and lists with no (or a wildcard) namespace run, but the store's namespace
  filter (memory/store.scope_sql → principal.namespace_read_filter) keeps only readable rows.
- Identity arguments on writes (`from`, `createdBy`, `callerOrchestrator`, `orchestrator`,
  `orchestratorId`, `requestedBy`, and `recipient` of check_messages) must name an orchestrator of
  `fromAllowList`; an omitted one is filled in when the list names exactly one (so an omitted
  optional caller cannot skip the tool's own RBAC), else refused. `system` is master-only.
- `add_deployment` / `remove_deployment` are master-only (MASTER_ONLY): they decide where the
  server sends a deploy key.
- Every other tool acts on shared, non-namespaced records (tasks, messages, diaries…): it needs a
  profile with at least one identity. `client-generic` and `public-readonly` have none, so they
  reach only namespaced reads inside their prefixes (plus `whoami`, `validate_task_payload`).
"""

from __future__ import annotations

import keyword
from typing import Any

from ..errors import VantageError
from .principal import Principal, current
from .profiles import allows, within

IDENTITY = ("from", "createdBy", "callerOrchestrator", "orchestrator", "orchestratorId", "requestedBy")
READ_IDENTITY = {"check_messages": ("recipient",),  # read tools whose identity argument means "me"
                 "get_message_delivery": ("callerOrchestrator",)}  # #21: only the sender sees delivery
WRITE_IDENTITY = {"acknowledge_message": ("recipient",)}  # #21: write tools' identity beyond IDENTITY
NOT_IDENTITY = {("create_bu", "orchestratorId"), ("update_bu", "orchestratorId")}  # the BU's owner, not the caller
OPEN_TOOLS = {"whoami", "validate_task_payload"}
# The server sends the deploy key named by `deployKeyEnvVar` to the deployment's URL: a scoped token
# that could register or re-point a deployment could have any DEPLOY_KEY_* secret sent to its host.
MASTER_ONLY = {"add_deployment", "remove_deployment"}


class ScopeForbidden(VantageError):
    code = "FORBIDDEN"


def _py(name: str) -> str:
    return name + "_" if keyword.iskeyword(name) else name


class ScopeGuard:
    def __init__(self, app: Any) -> None:
        self.app = app
        self._tools: dict[str, tuple[bool, set[str]]] = {}

    def _shape(self, tool: str) -> tuple[bool, set[str]]:
        if not self._tools:
            for t in self.app.tools:
                ro = bool(t.annotations and t.annotations.read_only_hint)
                self._tools[t.name] = (ro, set(t.parameters.get("properties", {})))
        return self._tools.get(tool, (False, set()))

    def __call__(self, tool: str, kwargs: dict[str, Any]) -> dict[str, Any] | None:
        p = current()
        if p is None or p.is_master:
            return None
        read_only, params = self._shape(tool)
        name = p.profile.profile_id
        if tool in MASTER_ONLY:
            raise ScopeForbidden(f"{tool} is reserved for the master bearer over HTTP (it decides where the "
                                 f"server sends a deploy key); profile {name} may not call it")
        namespaced = "namespace" in params or "memoryId" in params
        if namespaced:
            self._namespaces(p, tool, kwargs, read_only)
        elif tool not in OPEN_TOOLS and not p.profile.from_allow_list:
            raise ScopeForbidden(f"profile {name} has no orchestrator identity (empty fromAllowList): it may "
                                 f"only read namespaces within its prefixes, so {tool} is refused; ask an "
                                 "operator to elevate the client")
        checked = READ_IDENTITY.get(tool, ()) if read_only else IDENTITY + WRITE_IDENTITY.get(tool, ())  # #21
        out = dict(kwargs)
        for wire in checked:
            if wire in params and (tool, wire) not in NOT_IDENTITY:
                out[_py(wire)] = self._identity(p, tool, wire, kwargs.get(_py(wire)))
        return out

    # -- namespaces -----------------------------------------------------------------------------
    def _namespaces(self, p: Principal, tool: str, kwargs: dict[str, Any], read_only: bool) -> None:
        name = p.profile.profile_id
        ns = kwargs.get("namespace")
        if read_only and not p.profile.read_prefixes:
            raise ScopeForbidden(f"profile {name} may read no namespace (empty namespaceReadPrefixes)")
        if isinstance(ns, str) and ns not in ("", "*"):
            exact = ns[:-2] if ns.endswith("/*") else ns
            if read_only:
                # A wildcard partly outside the prefixes is narrowed by the store filter, not refused.
                if not ns.endswith("/*") and not allows(p.profile.read_prefixes, exact):
                    raise ScopeForbidden(f"profile {name} may not read namespace {ns!r} "
                                         f"(namespaceReadPrefixes: {list(p.profile.read_prefixes)})")
            else:
                self._writable(p, ns)
        memory_id = kwargs.get("memoryId")
        if isinstance(memory_id, str):
            target = self._namespace_of(memory_id)
            if target is not None:
                if read_only and not allows(p.profile.read_prefixes, target):
                    raise ScopeForbidden(f"profile {name} may not read namespace {target!r} (memory {memory_id})")
                if not read_only:
                    self._writable(p, target)
        edges = list(kwargs.get("relations") or []) + ([kwargs["relatesTo"]] if kwargs.get("relatesTo") else [])
        for edge in edges:
            target_id = getattr(edge, "targetId", None) or (edge.get("targetId") if isinstance(edge, dict) else None)
            kind = getattr(edge, "type", None) or (edge.get("type") if isinstance(edge, dict) else None)
            target = self._namespace_of(target_id) if isinstance(target_id, str) else None
            if target is None:
                continue
            if kind == "updates":  # archives the target: a write to its namespace
                self._writable(p, target)
            elif not allows(p.profile.read_prefixes, target):
                raise ScopeForbidden(f"profile {name} may not read namespace {target!r} (relation target {target_id})")

    def _writable(self, p: Principal, ns: str) -> None:
        name = p.profile.profile_id
        if within(ns, "global"):
            raise ScopeForbidden(f"namespace {ns!r} is read-only for every token but the master bearer "
                                 f"(profile {name})")
        if "*" in ns or not allows(p.profile.write_prefixes, ns):
            raise ScopeForbidden(f"profile {name} may not write namespace {ns!r} "
                                 f"(namespaceWritePrefixes: {list(p.profile.write_prefixes)})")

    def _namespace_of(self, memory_id: str) -> str | None:
        return self.app.db.read(lambda c: c.scalar("SELECT namespace FROM memories WHERE id = ?", (memory_id,)))

    # -- identities -------------------------------------------------------------------------------
    def _identity(self, p: Principal, tool: str, wire: str, value: Any) -> Any:
        name = p.profile.profile_id
        allowed = tuple(a for a in p.profile.from_allow_list if a != "system")  # system: master only
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
        if who == "system":
            raise ScopeForbidden(f"{tool}: {wire}='system' is honoured only for the master bearer (profile {name})")
        if "*" not in allowed and who not in allowed:
            raise ScopeForbidden(f"{tool}: profile {name} may not act as {who!r} ({wire}; fromAllowList: "
                                 f"{list(allowed)})")
        return value


def install(app: Any) -> ScopeGuard:
    guard = ScopeGuard(app)
    app.add_guard(guard)
    return guard


def install_resources(mcp: Any) -> None:
    """Resource reads over HTTP: the same identity rule as shared-record tools (memory rows a
    resource renders are narrowed by the store's namespace filter like any list)."""
    from mcp.server.mcpserver.exceptions import ResourceError

    original = mcp.read_resource

    async def read_resource(uri: Any, context: Any = None) -> Any:
        p = current()
        if p is not None and not p.is_master and not p.profile.from_allow_list:
            raise ResourceError(f"FORBIDDEN: profile {p.profile.profile_id} has no orchestrator identity "
                                f"(empty fromAllowList): resource {uri} is refused")
        return await original(uri, context)

    mcp.read_resource = read_resource  # MCPServer's resources/read handler calls this public method
