"""Argument models and enums for memories and episodes.

Enum-valued arguments are declared as strings whose JSON schema carries the `enum`, and are
checked with `validators.check_choice`: agents see the allowed values in `tools/list`, and a wrong value gets
`INVALID_ARGUMENT: type must be one of …` instead of a raw validation dump.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, WithJsonSchema

from ...core.validators import check_choice

# Spec §1.22: the union of both documented sets.
MEMORY_TYPES = ("user", "feedback", "project", "reference", "episode", "fact", "decision", "architecture",
                "note", "warning", "procedure", "observation")
RELATION_TYPES = ("updates", "extends", "derives", "references", "contradicts")
SEVERITIES = ("minor", "major", "critical", "low", "medium", "high")
EPISODE_FIELDS = ("context", "goal", "action", "outcome", "insight")


def _enum(values: tuple[str, ...], description: str = "") -> WithJsonSchema:
    return WithJsonSchema({"type": "string", "enum": list(values), **({"description": description} if description else {})})


MemoryTypeArg = Annotated[str, _enum(MEMORY_TYPES)]
RelationTypeArg = Annotated[str, _enum(RELATION_TYPES, "updates archives the target; the others only link")]
SeverityArg = Annotated[str, _enum(SEVERITIES, "minor/low < medium < major/high < critical")]
TypeFilterArg = Annotated[
    str | list[str] | None,
    WithJsonSchema({
        # The values are store_memory's `type` enum: listed there once, not in every filter (a lean
        # tools/list); a value outside it is refused naming the choices (check_types).
        "anyOf": [
            {"type": "string"},
            {"type": "array", "items": {"type": "string"}},
            {"type": "null"},
        ],
        "default": None,
        "description": "store_memory's types",
    }),
]


def check_types(value: str | list[str] | None, field: str = "type") -> list[str] | None:
    """A type filter: one type or a list of them; None means every type."""
    if value is None:
        return None
    values = [value] if isinstance(value, str) else list(value)
    if not values:
        return None
    return list(dict.fromkeys(check_choice(v, field, MEMORY_TYPES) for v in values))


class Relation(BaseModel):
    """A typed edge from the new memory to an existing one."""

    model_config = ConfigDict(extra="forbid")
    targetId: str
    type: RelationTypeArg


class Episode(BaseModel):
    """The structured payload of an episode (backend form of store_memory's `episode`)."""

    model_config = ConfigDict(extra="forbid")
    context: str
    goal: str
    action: str
    outcome: str
    insight: str
    severity: SeverityArg | None = None
