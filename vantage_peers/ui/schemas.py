"""`VpToolResultSchema` (spec §26): the payload of a stream marker, a union discriminated on `kind`.

The models forbid unknown keys nowhere (consumers may add fields) but require every documented
one with its type, so `wrap_tool_result` refuses a payload a consumer could not render.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, TypeAdapter

Number = StrictInt | StrictFloat


class _Model(BaseModel):
    model_config = ConfigDict(defer_build=True)  # validators built on first use, not at every start (#34)


class _Item(_Model):
    model_config = ConfigDict(extra="allow")


class TaskItem(_Item):
    id: StrictStr = Field(alias="_id")
    title: StrictStr
    status: StrictStr
    priority: StrictStr | None = None
    assignedTo: StrictStr | None = None
    creationTime: Number | None = Field(default=None, alias="_creationTime")


class MessageItem(_Item):
    id: StrictStr = Field(alias="_id")
    from_: StrictStr = Field(alias="from")
    channel: StrictStr | None = None
    content: StrictStr
    createdAt: Number


class DiaryItem(_Item):
    id: StrictStr = Field(alias="_id")
    date: Annotated[StrictStr, Field(pattern=r"^\d{4}-\d{2}-\d{2}$")]
    orchestrator: StrictStr
    content: StrictStr
    highlights: list[StrictStr] | None = None
    blockers: list[StrictStr] | None = None


class MissionItem(_Item):
    id: StrictStr = Field(alias="_id")
    name: StrictStr
    project: StrictStr | None = None
    status: StrictStr
    pilot: StrictStr | None = None
    priority: StrictStr | None = None
    progress: Annotated[Number, Field(ge=0, le=100)] | None = None


class BriefingItem(_Item):
    id: StrictStr = Field(alias="_id")
    topic: StrictStr
    title: StrictStr
    participants: list[StrictStr] | None = None
    content: StrictStr | None = None
    createdBy: StrictStr | None = None


class MemoryItem(_Item):
    id: StrictStr = Field(alias="_id")
    namespace: StrictStr
    type: StrictStr
    content: StrictStr
    score: Number | None = None


class TasksTable(_Model):
    kind: Literal["tasks-table"]
    items: list[TaskItem]


class MessagesFeed(_Model):
    kind: Literal["messages-feed"]
    items: list[MessageItem]


class DiaryEntry(_Model):
    kind: Literal["diary-entry"]
    item: DiaryItem


class MissionTimeline(_Model):
    kind: Literal["mission-timeline"]
    items: list[MissionItem]


class BriefingNote(_Model):
    kind: Literal["briefing-note"]
    item: BriefingItem


class MemoryQuote(_Model):
    kind: Literal["memory-quote"]
    items: list[MemoryItem]


VpToolResult = Annotated[
    TasksTable | MessagesFeed | DiaryEntry | MissionTimeline | BriefingNote | MemoryQuote,
    Field(discriminator="kind"),
]
VpToolResultSchema: TypeAdapter[VpToolResult] = TypeAdapter(VpToolResult, config=ConfigDict(defer_build=True))
KINDS = ("tasks-table", "messages-feed", "diary-entry", "mission-timeline", "briefing-note", "memory-quote")
