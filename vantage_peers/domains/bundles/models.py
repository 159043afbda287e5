"""The records of an OKF bundle, one pydantic model per JSON Lines member (format version 1).

Unknown keys are refused (a producer's typo must not silently lose data); every size is bounded
like the tools bound it. See docs/bundles.md for the same definitions in prose.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from ..memory.models import MEMORY_TYPES, RELATION_TYPES, SEVERITIES
from ..tasks.rules import PRIORITIES, TASK_STATUSES

FORMAT = "okf"
FORMAT_VERSION = 1
MAX_ID = 200
MAX_NAME = 10_000
MAX_TEXT = 1_048_576  # the 1 MiB content limit of memories, diary, briefings

Id = Annotated[StrictStr, Field(min_length=1, max_length=MAX_ID, pattern=r"^[^\x00-\x1f]+$")]
Name = Annotated[StrictStr, Field(min_length=1, max_length=MAX_NAME)]
Text = Annotated[StrictStr, Field(max_length=MAX_TEXT)]
Ms = Annotated[StrictInt, Field(ge=0, le=2**63 - 1)]
Number = StrictInt | StrictFloat
MemoryType = Literal[MEMORY_TYPES]  # type: ignore[valid-type]
RelationType = Literal[RELATION_TYPES]  # type: ignore[valid-type]
Severity = Literal[SEVERITIES]  # type: ignore[valid-type]
TaskStatus = Literal[TASK_STATUSES]  # type: ignore[valid-type]
Priority = Literal[PRIORITIES]  # type: ignore[valid-type]


class _Strict(BaseModel):
    # defer_build: validators are built on first use, not at every server start (#34)
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Relation(_Strict):
    targetId: Id
    type: RelationType


class Episode(_Strict):
    context: Text
    goal: Text
    action: Text
    outcome: Text
    insight: Text
    severity: Severity | None = None


class MemoryRecord(_Strict):
    id: Id
    type: MemoryType
    content: Annotated[StrictStr, Field(min_length=1, max_length=MAX_TEXT)]
    createdBy: Name
    relations: Annotated[list[Relation], Field(max_length=100)] | None = None
    isLatest: StrictBool = True
    supersededBy: Id | None = None
    deletedAt: Ms | None = None
    ttl: Annotated[StrictStr, Field(max_length=100)] | None = None
    expiresAt: Ms | None = None
    episode: Episode | None = None
    createdAt: Ms
    updatedAt: Ms


class BriefingRecord(_Strict):
    id: Id
    title: Name
    topic: Name
    participants: Annotated[list[Name], Field(max_length=200)]
    content: Text
    decisions: Annotated[list[Name], Field(max_length=200)] | None = None
    linkedMemoryIds: Annotated[list[Id], Field(max_length=200)] | None = None
    createdBy: Name
    updatedBy: Name | None = None
    createdAt: Ms
    updatedAt: Ms


class Segment(_Strict):
    id: Id
    orchestrator: Name | None = None
    startedAt: Ms
    endedAt: Ms | None = None
    createdAt: Ms


class TaskRecord(_Strict):
    id: Id
    title: Name
    description: Text | None = None
    project: Name | None = None
    tags: Annotated[list[Name], Field(max_length=200)] | None = None
    assignedTo: Name
    assignedToInstance: Name | None = None
    priority: Priority
    status: TaskStatus
    dependsOn: Annotated[list[Id], Field(max_length=200)] | None = None
    missionId: Id | None = None
    estimatedMinutes: Number | None = None
    actualMinutes: Number | None = None
    durationSource: Literal["measured", "inferred"] | None = None
    startedAt: Ms | None = None
    completedAt: Ms | None = None
    dueDate: Ms | None = None
    completionNote: Text | None = None
    blockedBy: Text | None = None
    cancelReason: Text | None = None
    paused: StrictBool = False
    pausedAt: Ms | None = None
    createdBy: Name
    createdAt: Ms
    updatedAt: Ms
    segments: Annotated[list[Segment], Field(max_length=10_000)] | None = None


class MemberInfo(_Strict):
    sha256: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
    bytes: Annotated[StrictInt, Field(ge=0)]
    records: Annotated[StrictInt, Field(ge=0)]


class Source(BaseModel):
    model_config = ConfigDict(extra="allow", defer_build=True)  # producers may say more about themselves
    tool: Name
    version: Name | None = None
    namespace: Annotated[StrictStr, Field(min_length=1, max_length=200)]
    exportedAt: Ms


class Manifest(_Strict):
    format: Literal["okf"]
    formatVersion: StrictInt
    source: Source
    counts: dict[StrictStr, Annotated[StrictInt, Field(ge=0)]]
    members: dict[StrictStr, MemberInfo]


# Member file name -> (record kind, model). The manifest is `manifest.json`.
MEMBERS: dict[str, tuple[str, type[BaseModel]]] = {
    "memories.jsonl": ("memory", MemoryRecord),
    "briefings.jsonl": ("briefing", BriefingRecord),
    "tasks.jsonl": ("task", TaskRecord),
}
COUNT_KEYS = {"memory": "memories", "briefing": "briefings", "task": "tasks"}


def dump(record: BaseModel) -> dict[str, Any]:
    return record.model_dump(mode="json", exclude_none=True)
