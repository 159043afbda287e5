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
from ...embedding.loadable import embedder_of
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
        self._cache: OrderedDict[tuple[str, str], list[float]] = OrderedDict()
        self._old: dict[str, Embedder | None] = {}  # a switch's old model, loaded once per process
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
        """(vector, None) for hybrid search over `table`, or (None, why keyword mode) — never raises.

        While the index switches to the configured model (search/vector_switch.py) the query is
        embedded by the index's *old* model when this process can load it, and answered as
        (vector, why these are the old model's vectors); else keyword mode says why."""
        embedder = self.embedder
        if embedder is None:
            return None, "embeddings are off (VP_EMBEDDINGS=none)"

        def state(conn) -> tuple[str | None, vectors.Recorded | None, str | None]:
            if conn.vec_version is None:
                return "the sqlite-vec extension is not available", None, None
            if not vectors.table_exists(conn, table):
                return f"no {table.label} has been embedded yet", None, None
            # the table's own record decides: a query vector meets only vectors of its own model
            problem = (vectors.mismatch(conn, embedder.model, embedder.dimensions)
                       or vectors.table_mismatch(conn, table, embedder.model, embedder.dimensions))
            old = vectors.table_model(conn, table)
            if problem and old is not None and vectors.switch_target(conn) == embedder.model:
                return problem, old, vectors.source_of(conn, old.model)
            return problem, None, None

        problem, old, source = db.read(state)
        if old is not None:  # a switch under way: the old index answers, with a query of its own model
            return self._old_model_vector(db, text, table, old, source)
        if problem:
            return None, problem
        return self._embed(db, embedder, text, table)

    def _old_model_vector(self, db: Any, text: str, table: vectors.VecTable, old: vectors.Recorded,
                          source: str | None) -> tuple[list[float] | None, str | None]:
        assert self.embedder is not None
        switching = f"the index is switching from {old.model!r} to {self.embedder.model!r} (`vantage-peers reindex`)"
        with self._lock:
            if old.model not in self._old:
                self._old[old.model] = embedder_of(old.model, source, self.settings)
            previous = self._old[old.model]
        if previous is None:
            return None, f"{switching}; {old.model!r} cannot be loaded here: keyword results only"
        vector, problem = self._embed(db, previous, text, table)
        if vector is None:
            return None, f"{switching}; {problem}"
        return vector, f"{switching}; vectors of {old.model!r} answer until it finishes"

    def _embed(self, db: Any, embedder: Embedder, text: str, table: vectors.VecTable,
               ) -> tuple[list[float] | None, str | None]:
        """`text` embedded by `embedder` as a query, checked against `table`'s record just before use."""
        key = (embedder.model, text)  # a cached vector is only ever reused with its own model
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return vectors.QueryVector(self._cache[key], embedder.model), None
            if time.monotonic() < self._down_until:
                return None, f"embedding endpoint unavailable ({self._down_reason}); retrying shortly"
        try:
            embed = getattr(embedder, "embed_query", embedder.embed)  # with the model's query prefix
            vector = embed([text], timeout=self.query_timeout)[0]
        except EmbeddingError as exc:
            with self._lock:
                self._down_until = time.monotonic() + COOLDOWN_S
                self._down_reason = str(exc)
            return None, f"embedding endpoint unavailable ({exc})"
        bad = vectors.unusable(vector)
        if bad:  # e.g. an all-zero vector for `(((`: cosine is undefined, answer from BM25 and say why
            return None, f"{bad} for this query (cosine similarity is undefined); keyword results only"
        problem = db.read(lambda c: vectors.table_mismatch(c, table, embedder.model, len(vector)))
        if problem:  # the index changed model meanwhile (a switch just completed): never compare across
            return None, problem
        recorded = db.read(lambda c: vectors.table_model(c, table) or vectors.recorded(c))
        if recorded is not None and len(vector) != recorded.dimensions:
            return None, (f"the endpoint returns {len(vector)}-dimensional vectors but the file holds "
                          f"{recorded.dimensions}; run `vantage-peers reindex`")
        with self._lock:
            self._down_until = 0.0
            self._cache[key] = vector
            if len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return vectors.QueryVector(vector, embedder.model), None


def services(app: Any) -> MemoryServices:
    """This App's embedding services (one per App: its settings, its cache and circuit state)."""
    return app.extension("memory.services", lambda: MemoryServices(app.settings))
