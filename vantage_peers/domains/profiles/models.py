"""Argument models for profiles."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class StaticProfile(BaseModel):
    """Static identity; every key optional so that an update can touch just one."""

    model_config = ConfigDict(extra="forbid")
    role: str | None = Field(default=None, max_length=500)
    workspace: str | None = Field(default=None, max_length=500)
    capabilities: list[str] | None = Field(default=None, max_length=200)
    # The task pools this orchestrator works from (create_task `pool`); its `role` counts as one too.
    pools: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(default=None, max_length=50)


class DynamicProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    currentTask: str | None = Field(default=None, max_length=2000)
    lastSeen: int | None = Field(default=None, ge=0)
    sessionCount: int | None = Field(default=None, ge=0)
