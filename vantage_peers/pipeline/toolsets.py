"""Toolsets: every tool belongs to one named set, so a client with a tool cap sees the core first.

Cursor hands its agent only the first 40 tools and Windsurf caps at 50, so the order of
`tools/list` matters: `list_toolsets` / `enable_toolset` come first, then `core`, then the other
sets in the order below. `VP_TOOLSETS` (default `all`) picks the sets listed at start-up; `core`
is always on. A client that follows `notifications/tools/list_changed` can add a set at run time
with `enable_toolset`; calling a tool of a set that is off answers `TOOLSET_DISABLED`.

The set of a tool comes from its domain package (`vantage_peers.domains.<name>`) through
DOMAIN_TOOLSETS; a domain not in the map lands in DEFAULT_TOOLSET.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import InvalidArgument, VantageError
from .host import Host as App  # the App as the pipeline sees it (app.py builds on this module)

CORE = "core"
# name -> what it holds (shown by list_toolsets and in the README); the order is the listing order.
TOOLSETS: dict[str, str] = {
    "core": "presence and profiles, messaging and its acknowledgements, tasks, memory and search: what every "
            "session uses",
    "missions": "missions and mission templates",
    "knowledge": "episodes, fix patterns and the component registry",
    "records": "diary, briefing notes, mandates, business units and the improvisation digest",
    "automation": "recurring tasks",
    "coordination": "leases: task claim renewal, path reservations for coding agents, named slots",
    "github": "GitHub issues, repo mappings, deployments and error monitoring",
    "admin": "OKF bundles and iframe embed sessions",
    # #30: the rarely used messaging tools, out of core so that core fits Cursor's 40 tools.
    "extras": "list_broadcast_status, search_messages_by_keyword, and any domain not assigned to a toolset",
}
DEFAULT_TOOLSET = "extras"

DOMAIN_TOOLSETS: dict[str, str] = {
    "profiles": "core",
    "messaging": "core",
    "tasks": "core",
    "memory": "core",  # memories plus recall / text_search / hybrid_search
    "missions": "missions",
    "templates": "missions",
    "episodes": "knowledge",
    "fix_patterns": "knowledge",
    "components": "knowledge",
    "diary": "records",
    "briefings": "records",
    "mandates": "records",
    "business_units": "records",
    "improvisation": "records",
    "recurring": "automation",
    "leases": "coordination",  # #22; not core (core is capped at 40 tools)
    "github": "github",
    "bundles": "admin",
    "iframe": "admin",
}


class ToolsetDisabled(VantageError):
    code = "TOOLSET_DISABLED"


def toolset_for_module(module: str) -> str:
    """The toolset of a tool defined in `module` (`vantage_peers.domains.<domain>.…`)."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] == "domains":
        return DOMAIN_TOOLSETS.get(parts[2], DEFAULT_TOOLSET)
    return DEFAULT_TOOLSET


def parse_toolsets(value: str | None) -> tuple[str, ...]:
    """`VP_TOOLSETS`: `all` (default) or a comma list of toolset names; `core` is always included."""
    raw = [part.strip().lower() for part in (value or "all").split(",") if part.strip()]
    if not raw or "all" in raw:
        return ("all",)
    unknown = [name for name in raw if name not in TOOLSETS]
    if unknown:
        raise InvalidArgument(f"VP_TOOLSETS: unknown toolset(s) {', '.join(unknown)}; "
                              f"choose from all, {', '.join(TOOLSETS)}")
    return tuple(dict.fromkeys([CORE, *raw]))


def initial_toolsets(app: App) -> set[str]:
    chosen = app.settings.toolsets
    return set(TOOLSETS) if "all" in chosen else set(chosen) | {CORE}


def order_tools(app: App) -> None:
    app.tools[:] = ordered(app, app.tools)


def ordered(app: App, tools: list[Any]) -> list[Any]:
    """Toolset tools first, then core, then every other set in TOOLSETS order (stable inside a set)."""
    rank = {name: i for i, name in enumerate(TOOLSETS)}
    pinned = ("list_toolsets", "enable_toolset")
    # Then registration order (tool_order), whichever domain was loaded first (deferred.py).
    return sorted(tools, key=lambda t: (t.name not in pinned, rank.get(app.toolset_of.get(t.name, DEFAULT_TOOLSET), 99),
                                  app.tool_order.get(t.name, (0, 0))))


def is_enabled(app: App, tool_name: str) -> bool:
    toolset = app.toolset_of.get(tool_name)
    return toolset is None or toolset in app.enabled_toolsets


def check_enabled(app: App, tool_name: str) -> None:
    toolset = app.toolset_of.get(tool_name)
    if toolset is not None and toolset not in app.enabled_toolsets:
        raise ToolsetDisabled(f"{tool_name} is in the '{toolset}' toolset, which this server has not enabled "
                              f"(VP_TOOLSETS={','.join(app.settings.toolsets)}); "
                              f'call enable_toolset("{toolset}") and list the tools again')


def summary(app: App) -> list[dict[str, Any]]:
    out = []
    for name, about in TOOLSETS.items():
        # dict.fromkeys: while deferred domains load (deferred.py) a name is briefly there twice
        members = [t for t in dict.fromkeys(tool.name for tool in app.tools) if app.toolset_of.get(t) == name]
        if members or name == CORE:
            out.append({"name": name, "description": about, "enabled": name in app.enabled_toolsets,
                        "tools": members})
    return out


def register(app: App) -> None:
    @app.tool("read", toolset=CORE)
    def list_toolsets() -> dict[str, Any]:
        """List the toolsets, which are on, and their tools."""
        return {"items": summary(app)}

    @app.tool("idempotent", toolset=CORE)
    def enable_toolset(name: str) -> dict[str, Any]:
        """Turn on a toolset (or `all`) for this session; returns the tools added."""
        wanted = name.strip().lower() if isinstance(name, str) else ""
        names = [n for n in TOOLSETS if any(app.toolset_of.get(t.name) == n for t in app.tools)]
        if wanted != "all" and wanted not in TOOLSETS:
            from .arguments import nearest

            near = nearest(wanted, names)
            raise InvalidArgument(f"no toolset named {name!r}" + (f"; did you mean {near!r}?" if near else "")
                                  + f"; toolsets: all, {', '.join(names)}")
        targets = set(TOOLSETS) if wanted == "all" else {wanted}
        if targets - app.enabled_toolsets:
            app.complete_registration()  # the domains of a set left out at start (deferred.py)
        added = [t.name for t in app.tools
                 if app.toolset_of.get(t.name) in targets - app.enabled_toolsets]
        app.enabled_toolsets |= targets
        if added:
            app.tools_changed()
        return {"name": wanted, "enabled": [n for n in TOOLSETS if n in app.enabled_toolsets and n in names],
                "added": added}
