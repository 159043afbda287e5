"""The App as the call pipeline sees it: what calls.py and toolsets.py read and call on it.

app.py imports calls.py and toolsets.py to build tools, so they cannot import app.py back (not even
for type checking: `lint-imports` counts those imports too). They name this protocol instead; the
App implements it. Settings are typed by the few fields read here, for the same reason (settings.py
imports toolsets.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # types only: settings.py imports toolsets.py, and `vantage-peers wait` (each prompt's
    # hook) reads settings — the SDK's import (~0.5 s, through policy.py too) stays off that path
    from mcp.server.mcpserver.tools import Tool

    from ..db import Database
    from .policy import Loader


class HostSettings(Protocol):
    """The Settings fields the pipeline reads (policy.resolve and presence_of read the first two)."""

    orchestrator: str | None
    instance_id: str | None
    busy_timeout_ms: int
    toolsets: tuple[str, ...]


class Host(Protocol):
    settings: HostSettings
    db: Database
    tools: list[Tool]
    records: dict[str, Loader]
    toolset_of: dict[str, str]
    tool_order: dict[str, tuple[int, int]]
    enabled_toolsets: set[str]
    before_call_hooks: list[Callable[[str, dict[str, Any]], dict[str, Any] | None]]
    result_hooks: dict[str, list[Callable[[Any], Any]]]
    dense_text: set[str]

    def warn(self, message: str) -> None: ...

    def tools_changed(self) -> None: ...

    def namespace_of(self, memory_id: str) -> str | None: ...

    def touch_presence(self, orch: str | None, inst: str | None) -> None: ...

    def complete_registration(self) -> None: ...

    def tool(self, kind: str, **options: Any) -> Callable[[Any], Any]: ...
