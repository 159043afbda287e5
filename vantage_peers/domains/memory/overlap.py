"""recall's two slow stages side by side.

A hybrid recall embeds the query, then ranks by BM25 and by KNN and fuses. The keyword ranking does
not need the query vector, so it is read on a worker thread (its own connection and read snapshot)
while the calling thread embeds the query and runs the KNN; the fusion waits for both. With a core
free, a recall costs the longer of the two paths instead of their sum (SQLite, pgvector, ONNX
Runtime and numpy all release the GIL while they work). The hits' rows are read in the fusion's
snapshot: a memory deleted in between is skipped like any row gone since it was ranked.

The worker adopts the caller's call scope (db/busy.py): the call's search budget and `truncated` flag.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ...db import adopted, current_scope
from . import search
from .vectors import Scope

Embed = Callable[[], tuple[Sequence[float] | None, str | None]]

_WORKERS = 2  # concurrent recalls whose keyword stage runs beside them; more wait their turn
_executor: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="vp-recall-keyword")
        return _executor


def recall(db: Any, *, query: str, embed: Embed, scope: Scope | None, types: Sequence[str] | None,
           include_superseded: bool, limit: int, now: int, **fusion: Any) -> dict[str, Any]:
    """`search.hybrid` with its keyword candidates read on a worker thread while `embed()` (the query
    vector and why there is none) and the KNN run here. `fusion`: hybrid's other arguments."""
    args = dict(query=query, scope=scope, types=types, include_superseded=include_superseded, now=now, limit=limit)
    call = current_scope()  # the worker adopts it (not the search `scope` above)

    def stage() -> dict[int, float]:
        with adopted(call):
            return db.read(lambda c: search.keyword_candidates(c, **args))

    keyword = _pool().submit(stage)
    try:
        vector, reason = embed()
    except BaseException:
        keyword.cancel()  # if it already runs, it ends on its own: nothing waits for it
        raise
    return db.read(lambda c: search.hybrid(c, vector=vector, reason=reason, keyword=keyword.result, **args, **fusion))
