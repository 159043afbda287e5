"""Per-app embedding state: the provider, a query-vector cache, and a circuit breaker.

Shared by every searched corpus (memories, fix patterns): one endpoint, one breaker.

A query embeds synchronously with a short timeout. When that fails, searches answer from BM25 and
the breaker keeps later queries from waiting on a dead endpoint for `COOLDOWN_S`; the background
indexer is not affected (it has its own per-job backoff).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections import OrderedDict
from typing import Any

from ...embedding.embeddings import Embedder, EmbeddingError, embedder_for
from . import vectors

log = logging.getLogger("vantage_peers.embeddings")

QUERY_TIMEOUT_S = 3.0
COOLDOWN_S = 30.0
CACHE_SIZE = 256


class MemoryServices:
    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self.embedder: Embedder | None = embedder_for(settings)
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"  # lease owner for embedding jobs
        self.query_timeout = QUERY_TIMEOUT_S
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._down_until = 0.0
        self._down_reason = ""

    def reranker(self) -> Any:
        """recall's reranker (VP_RERANK_MODEL) as a scoring function that never raises: a failure
        returns the candidates' own order (scores descending by position), logged once per call."""
        from ...embedding.rerank import reranker_for

        model = reranker_for(self.settings)
        if model is None:
            return None

        def score(query: str, docs: list[str]) -> list[float]:
            try:
                return model.score(query, docs)
            except EmbeddingError as exc:
                log.warning("reranker skipped: %s", exc)
                return [-float(i) for i in range(len(docs))]

        return score

    def query_vector(self, db: Any, text: str, *, table: vectors.VecTable = vectors.MEMORIES,
                     ) -> tuple[list[float] | None, str | None]:
        """(vector, None) for hybrid search over `table`, or (None, why keyword mode) — never raises."""
        embedder = self.embedder
        if embedder is None:
            return None, "embeddings are off (VP_EMBEDDINGS=none)"

        def state(conn) -> str | None:
            if conn.vec_version is None:
                return "the sqlite-vec extension is not available"
            if not vectors.table_exists(conn, table):
                return f"no {table.label} has been embedded yet"
            # the table's own record decides: a query vector meets only vectors of its own model
            return (vectors.mismatch(conn, embedder.model, embedder.dimensions)
                    or vectors.table_mismatch(conn, table, embedder.model, embedder.dimensions))

        problem = db.read(state)
        if problem:
            return None, problem
        with self._lock:
            if text in self._cache:
                self._cache.move_to_end(text)
                return self._cache[text], None
            if time.monotonic() < self._down_until:
                return None, f"embedding endpoint unavailable ({self._down_reason}); retrying shortly"
        try:
            vector = embedder.embed([text], timeout=self.query_timeout)[0]
        except EmbeddingError as exc:
            with self._lock:
                self._down_until = time.monotonic() + COOLDOWN_S
                self._down_reason = str(exc)
            return None, f"embedding endpoint unavailable ({exc})"
        bad = vectors.unusable(vector)
        if bad:  # e.g. an all-zero vector for `(((`: cosine is undefined, answer from BM25 and say why
            return None, f"{bad} for this query (cosine similarity is undefined); keyword results only"
        recorded = db.read(lambda c: vectors.table_model(c, table) or vectors.recorded(c))
        if recorded is not None and len(vector) != recorded.dimensions:
            return None, (f"the endpoint returns {len(vector)}-dimensional vectors but the file holds "
                          f"{recorded.dimensions}; run `vantage-peers reindex`")
        with self._lock:
            self._down_until = 0.0
            self._cache[text] = vector
            if len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return vector, None


def services(app: Any) -> MemoryServices:
    """This App's embedding services (one per App: its settings, its cache and circuit state)."""
    return app.extension("memory.services", lambda: MemoryServices(app.settings))
