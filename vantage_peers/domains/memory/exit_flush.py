"""Embedding what a short-lived process wrote before it exits (#20).

A CLI-style MCP client may start `vantage-peers`, store a memory and quit within a second: the
background job may not have run (the local model alone takes about a second to load). On the way
out the server embeds its own backlog for at most EXIT_BUDGET_S seconds, in small batches so the
bound holds; whatever is left stays queued for the next process to start (its scheduler's first tick
runs the embedding job) and `vantage-peers status` shows the backlog.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from . import indexer
from .services import services

log = logging.getLogger("vantage_peers.embeddings")

EXIT_BUDGET_S = 2.0
EXIT_BATCH = 16  # small batches: the budget is checked between them


def embed_before_exit(app: Any, *, budget_s: float = EXIT_BUDGET_S) -> dict[str, Any]:
    """Embed queued jobs of `app.corpora` for at most about `budget_s` seconds; never raises."""
    started = time.monotonic()
    try:
        svc = services(app)
        if svc.embedder is None:
            return {"embedded": 0, "skipped": "embeddings are off"}
        if not app.db.read(lambda c: indexer.pending(c, app.corpora))["pending"]:
            return {"embedded": 0, "failed": 0}
        result = indexer.embed_pending(app.db, svc.embedder, owner=svc.owner, batch=EXIT_BATCH,
                                       budget_s=budget_s, corpora=app.corpora)
    except Exception as exc:  # noqa: BLE001 - exiting anyway: the jobs stay queued for the next process
        log.warning("embedding before exit failed, jobs stay queued: %s", exc)
        return {"embedded": 0, "error": str(exc)}
    result["seconds"] = round(time.monotonic() - started, 3)
    return result
