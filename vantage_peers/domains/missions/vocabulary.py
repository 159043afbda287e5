"""Mission vocabulary: mission statuses and aliases, the lite projection, and the words missions share
with tasks (priorities, how a status filter reads). Tasks sit above missions (a task may belong to
one), so tasks import these from here and missions never import tasks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ...core.errors import InvalidArgument

PRIORITIES = ("urgent", "high", "medium", "low")
MISSION_STATUSES = ("brainstorm", "plan", "execute", "validate", "complete", "cancelled")
MISSION_ALIASES: dict[str, tuple[str, ...] | None] = {
    "open": ("brainstorm", "plan", "execute", "validate"),
    "active": ("plan", "execute"),
    "all": None,
}
MISSION_LITE = ("_id", "_creationTime", "name", "status", "pilot", "priority", "project")


def resolve_status_filter(
    value: str | Sequence[str] | None,
    *,
    statuses: Sequence[str],
    aliases: Mapping[str, tuple[str, ...] | None],
    field: str = "status",
) -> tuple[str, ...] | None:
    """A status filter (value, array, or alias) as the tuple of statuses to keep; None = no filter."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else list(value)
    if not items:
        raise InvalidArgument(f"{field} must not be an empty array; omit it or pass 'all' for every status")
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise InvalidArgument(f"{field} values must be strings")
        key = item.strip()
        if key in aliases:
            expanded = aliases[key]
            if expanded is None:
                return None
            out.extend(expanded)
        elif key in statuses:
            out.append(key)
        else:
            allowed = ", ".join([*statuses, *aliases])
            raise InvalidArgument(f"{field} {item!r} is not a status or alias; use one of: {allowed}")
    return tuple(dict.fromkeys(out))


def status_sql(column: str, keep: tuple[str, ...]) -> str:
    """`column IN ('a', 'b')` with literal values (all from a fixed enum), so that SQLite can use the
    partial index written with the same literal list."""
    assert all(s.replace("_", "").isalpha() for s in keep)
    return f"{column} IN ({', '.join(repr(s) for s in keep)})"
