"""MCP tool: improvisation_digest."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ...app import App, check_name
from . import store


def register(app: App) -> None:
    @app.tool("read")
    def improvisation_digest(
        windowDays: Annotated[float, Field(gt=0, le=3650)] = 7,
        orchestrators: Annotated[list[str] | None, Field(max_length=200)] = None,
    ) -> dict[str, Any]:
        """Advisory digest of tasks, messages and memories that state fleet facts without a VP-Sources footer.

        Scans the last `windowDays` (default 7) for records holding a durable-artifact token (a 7–40
        hex commit SHA, a `#NNN` reference, a document id, or merged/deployed/approved/shipped/
        released/fixed) and no `VP-Sources:` substring. Records by `system`, `cron-*` or webhook
        authors are never flagged. Pure read, no side effects. Returns `{countsByOrch,
        countsByCategory, samples}`: zero counts are omitted; at most 50 samples, newest first.
        """
        names = [check_name(o, "orchestrators") for o in orchestrators] if orchestrators else None
        return app.db.read(lambda c: store.digest(c, window_days=windowDays, orchestrators=names))
