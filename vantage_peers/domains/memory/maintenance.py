"""Embedding maintenance for the CLI: the `doctor` checks and `vantage-peers reindex`."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from ...db import Database
from ...embedding.embeddings import EmbeddingError, embedder_for
from ...search.corpus import Corpus
from . import indexer, vectors

PROBE_TIMEOUT_S = 10.0


def doctor_checks(settings: Any, db: Database, corpora: Sequence[Corpus] | None = None) -> list[tuple[str, str, str]]:
    """(status, label, detail) lines: recorded vs configured model, endpoint reachable, queue health,
    over `corpora` (the app's `app.corpora`; default the memories alone)."""
    out: list[tuple[str, str, str]] = []
    embedder = embedder_for(settings)
    rec = db.read(vectors.recorded)
    counts = {c.name: db.read(lambda conn, c=c: vectors.count(conn, c.vec)) for c in indexer.corpora_of(corpora)}
    detail = ", ".join(f"{n} {name}" for name, n in counts.items() if n)
    split = f": {detail}" if sum(1 for n in counts.values() if n) > 1 else ""
    on_file = f"{rec.model} ({rec.dimensions} dims, {sum(counts.values())} vectors{split})" if rec else "none yet"
    if embedder is None:
        out.append(("ok", "embeddings", f"off (keyword search only); vectors on file: {on_file}"))
    else:
        problem = db.read(lambda c: vectors.mismatch(c, embedder.model, embedder.dimensions))
        if problem:
            out.append(("FAIL", "embedding model", problem))
        else:
            out.append(("ok", "embedding model", f"configured {embedder.model}; on file: {on_file}"))
        local = settings.embeddings == "local"
        label = "local embedding model" if local else "embedding endpoint"
        try:
            probe = embedder.embed(["vantage-peers doctor probe"], timeout=PROBE_TIMEOUT_S)[0]
            if rec is not None and len(probe) != rec.dimensions:
                out.append(("FAIL", label,
                            f"returns {len(probe)} dimensions, file holds {rec.dimensions}; run `vantage-peers reindex`"))
            elif local:
                out.append(("ok", label, f"{embedder.describe()}, offline"))  # type: ignore[attr-defined]
            else:
                out.append(("ok", label, f"reachable, {len(probe)} dimensions"))
        except EmbeddingError as exc:
            where = "bundled model" if local else settings.openai_base_url or "api.openai.com"
            out.append(("FAIL", label, f"{where}: {exc}"))
    queue = db.read(lambda c: indexer.pending(c, corpora))
    if queue["pending"] and embedder is not None:
        detail = ", ".join(f"{n} {name}" for name, n in queue["byCorpus"].items()) + " waiting to be embedded"
        if queue.get("maxAttempts"):
            detail += f" (up to {queue['maxAttempts']} failed attempts; last error: {queue.get('lastError')})"
        out.append(("WARN" if queue.get("maxAttempts") else "ok", "embedding queue", detail))
    return out


def reindex(settings: Any, db: Database, *, corpora: Sequence[Corpus] | None = None, err: TextIO | None = None, max_failures: int = 5,
            pause: Callable[[float], None] = time.sleep) -> int:
    """Drop every vector, queue every memory and fix pattern (every corpus) and embed them all now,
    with a progress bar on `err`.

    Returns a process exit code: 0 when everything was embedded, 1 when the endpoint kept failing
    (the remaining jobs stay queued for the server's background worker).
    """
    err = err or sys.stderr
    embedder = embedder_for(settings)
    if embedder is None:
        err.write("vantage-peers reindex: embeddings are off (VP_EMBEDDINGS=none); unset it for the local model, "
                  "or set OPENAI_API_KEY / OPENAI_BASE_URL first\n")
        return 2
    total = db.write(lambda c: indexer.reset_all(c, corpora))
    owner = f"reindex-{uuid.uuid4().hex[:8]}"
    done, failures = 0, 0

    def bar() -> None:
        width = 30
        filled = width if total == 0 else int(width * done / total)
        pct = 100 if total == 0 else int(100 * done / total)
        err.write(f"\rreindex {embedder.model}: [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {pct}%")
        err.flush()

    def progress(n: int) -> None:
        nonlocal done
        done += n
        bar()

    bar()
    while done < total:
        result = indexer.embed_pending(db, embedder, owner=owner, budget_s=3600, on_progress=progress, corpora=corpora)
        if result.get("skipped"):
            err.write(f"\nvantage-peers reindex: {result['skipped']}\n")
            return 1
        if result.get("error"):
            failures += 1
            if failures >= max_failures:
                err.write(f"\nvantage-peers reindex: the endpoint keeps failing ({result['error']}); "
                          f"{total - done} rows stay queued for the background worker\n")
                return 1
            pause(min(2**failures, 30))
            # A person is waiting: retry now rather than after the background backoff.
            db.write(lambda c: indexer.retry_now(c, corpora))
        elif result["embedded"] == 0:
            break  # what is left is leased by a server process, or refused item by item
    err.write("\n")
    left = db.read(lambda c: indexer.pending(c, corpora))["pending"]
    if left:
        err.write(f"vantage-peers reindex: {left} rows are not embedded yet (see `vantage-peers doctor`)\n")
        return 1
    return 0
