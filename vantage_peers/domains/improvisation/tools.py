"""MCP tool: improvisation_digest."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ...core.validators import check_name
from ...pipeline.app import App
from . import store


def register(app: App) -> None:
    @app.tool("read")
    def improvisation_digest(
        windowDays: Annotated[float, Field(gt=0, le=3650)] = 7,
        orchestrators: Annotated[list[str] | None, Field(max_length=200)] = None,
    ) -> dict[str, Any]:
        """Advisory: recent tasks, messages and memories that state fleet facts with no VP-Sources footer; returns counts."""
        names = [check_name(o, "orchestrators") for o in orchestrators] if orchestrators else None
        return app.db.read(lambda c: store.digest(c, window_days=windowDays, orchestrators=names))
