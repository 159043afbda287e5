"""Embedding maintenance for the CLI: the `doctor` checks and `vantage-peers reindex`."""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from ...db import Database
from ...embedding.embeddings import EmbeddingError, embedder_for
from ...search import vector_switch
from ...search.corpus import Corpus
from . import indexer, vectors

PROBE_TIMEOUT_S = 10.0
REINDEX_MARK = "embedding.reindex"  # meta: the model a reindex under way (or killed) is building
REINDEX_BATCH = 256  # rows claimed per round; the local model splits them by its token budget


def _reranker_line(chosen: str | None) -> tuple[str, str, str] | None:
    """VP_RERANK_MODEL (#35): a catalogue name's files in the cache (fetched on the first recall when
    absent: WARN, recall works meanwhile), or a folder's graph and tokenizer (FAIL when missing)."""
    if not chosen:
        return None
    from ...embedding.catalogue import RERANKERS, present
    from ...embedding.local import folder_files

    entry = RERANKERS.get(chosen)
    if entry is not None:
        missing = [path for path, here in present(entry) if not here]
        return (("WARN", "reranker", f"{chosen}: not downloaded yet (fetched on the first recall): {', '.join(missing)}")
                if missing else ("ok", "reranker", f"{chosen} (files present)"))
    try:
        graph, tokenizer = folder_files(Path(chosen))
    except EmbeddingError as exc:
        return "FAIL", "reranker", str(exc)
    return "ok", "reranker", f"{graph}, {tokenizer}"


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
            switching = db.read(vectors.switch_target) == embedder.model  # the new model may have other dims
            if rec is not None and len(probe) != rec.dimensions and not switching:
                out.append(("FAIL", label,
                            f"returns {len(probe)} dimensions, file holds {rec.dimensions}; run `vantage-peers reindex`"))
            elif local:
                out.append(("ok", label, f"{embedder.describe()}, offline"))  # type: ignore[attr-defined]
            else:
                out.append(("ok", label, f"reachable, {len(probe)} dimensions"))
        except EmbeddingError as exc:
            where = "bundled model" if local else settings.openai_base_url or "api.openai.com"
            out.append(("FAIL", label, f"{where}: {exc}"))
    if embedder is not None and settings.embeddings == "local":
        from ...embedding.local import local_embedder

        files = embedder.files() if hasattr(embedder, "files") else local_embedder().files()
        missing = [path for path, present in files if not present]
        out.append(("FAIL" if missing else "ok", "model files",
                    f"missing: {', '.join(missing)}" if missing else ", ".join(path for path, _ in files)))
    reranker = _reranker_line(getattr(settings, "rerank_model", None))
    if reranker is not None:
        out.append(reranker)
    tables = db.read(lambda c: [(c2.name, vectors.table_model(c, c2.vec)) for c2 in indexer.corpora_of(corpora)])
    recorded_tables = [f"{name}: {rec.model} ({rec.dimensions} dims)" for name, rec in tables if rec is not None]
    if recorded_tables:
        out.append(("ok", "index model", "; ".join(recorded_tables)))
    switch = db.read(lambda c: vector_switch.progress(c, indexer.corpora_of(corpora)))
    if switch is not None:
        out.append(("WARN", "index", f"{switch.old or 'none'} (switching to {switch.new}: {switch.embedded} of "
                    f"{switch.total} embedded; run `vantage-peers reindex` to finish)"))
    mark = db.read(lambda c: c.scalar("SELECT value FROM meta WHERE key = ?", (REINDEX_MARK,)))
    if mark:
        out.append(("WARN", "reindex", f"a reindex to {mark} was interrupted; run `vantage-peers reindex` to finish it"))
    queue = db.read(lambda c: indexer.pending(c, corpora))
    if queue["pending"] and embedder is not None:
        detail = ", ".join(f"{n} {name}" for name, n in queue["byCorpus"].items()) + " waiting to be embedded"
        if queue.get("maxAttempts"):
            detail += f" (up to {queue['maxAttempts']} failed attempts; last error: {queue.get('lastError')})"
        out.append(("WARN" if queue.get("maxAttempts") else "ok", "embedding queue", detail))
    return out


def reindex_embedder(settings: Any) -> Any:
    """The embedder `reindex` uses: the local model in this process on every core (a person is waiting;
    through the shared host it would queue one batch at a time behind every server's queries, #34),
    else the configured provider."""
    if settings.embeddings == "local":
        from ...embedding.embeddings import folder_embedder
        from ...embedding.local import LocalEmbedder

        cores = max(1, min(4, os.cpu_count() or 1))
        named = getattr(settings, "embed_model", None)
        return folder_embedder(named, threads=cores) if named else LocalEmbedder(idle_unload_s=None, threads=cores)
    return embedder_for(settings)


def _begin(conn: Any, corpora: Sequence[Corpus] | None, model: str) -> tuple[int, int]:
    """(total, already done). A reindex for `model` that was killed resumes where it stopped: its
    finished rows have no job left, and the dead run's leases are released. Otherwise every row is
    queued and the run is marked in `meta` until it finishes; the vectors on file are dropped first
    when they are `model`'s own, or kept searchable until the end when another model made them (a
    switch, search/vector_switch.py)."""
    mark = conn.scalar("SELECT value FROM meta WHERE key = ?", (REINDEX_MARK,))
    if mark == model:
        total = pending = 0
        for corpus in indexer.corpora_of(corpora):
            conn.execute(f"UPDATE {corpus.jobs} SET leaseOwner = NULL, leaseUntil = NULL, nextAttemptAt = 0 "
                         "WHERE leaseOwner LIKE 'reindex-%'")
            total += int(conn.scalar(f"SELECT count(*) FROM {corpus.source}"))
            pending += int(conn.scalar(f"SELECT count(*) FROM {corpus.jobs}"))
        return total, max(0, total - pending)
    tables = [c.vec for c in indexer.corpora_of(corpora)]
    if vector_switch.needed(conn, tables, model):  # another model's vectors stay searchable meanwhile
        vector_switch.begin(conn, tables, model)
        total = indexer.queue_all(conn, corpora)
    else:
        total = indexer.reset_all(conn, corpora)
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                 (REINDEX_MARK, model))
    return total, 0


def reindex(settings: Any, db: Database, *, corpora: Sequence[Corpus] | None = None, err: TextIO | None = None, max_failures: int = 5,
            pause: Callable[[float], None] = time.sleep, embedder: Any = None) -> int:
    """Re-embed every memory and fix pattern (every corpus) now, with a progress bar on `err` (items,
    rate, ETA). Resumable: run again after a kill and it embeds only what was not done. Memory stays
    bounded: rows are claimed REINDEX_BATCH at a time and the local model runs token-budget batches.

    Returns a process exit code: 0 when everything was embedded, 1 when the endpoint kept failing
    (the remaining jobs stay queued for the server's background worker).
    """
    from tqdm import tqdm

    err = err or sys.stderr
    embedder = embedder or reindex_embedder(settings)
    if embedder is None:
        err.write("vantage-peers reindex: embeddings are off (VP_EMBEDDINGS=none); unset it for the local model, "
                  "or set OPENAI_API_KEY / OPENAI_BASE_URL first\n")
        return 2
    total, done = db.write(lambda c: _begin(c, corpora, embedder.model))
    if done:
        err.write(f"vantage-peers reindex: resuming, {done} of {total} already embedded with {embedder.model}\n")
    owner = f"reindex-{uuid.uuid4().hex[:8]}"
    failures = 0
    bar = tqdm(total=total, initial=done, desc=f"reindex {embedder.model}", unit=" docs", file=err,
               mininterval=0.5, smoothing=0.1, ascii=not getattr(err, "isatty", lambda: False)())
    try:
        while done < total:
            result = indexer.embed_pending(db, embedder, owner=owner, budget_s=3600, batch=REINDEX_BATCH,
                                           on_progress=bar.update, corpora=corpora)
            done += result["embedded"]
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
    finally:
        bar.close()
    left = db.read(lambda c: indexer.pending(c, corpora))["pending"]
    if left:
        err.write(f"vantage-peers reindex: {left} rows are not embedded yet (see `vantage-peers doctor`)\n")
        return 1
    def done_(c: Any) -> None:
        vector_switch.finish(c, indexer.corpora_of(corpora), embedder.model)  # the swap, in this transaction
        c.execute("DELETE FROM meta WHERE key = ?", (REINDEX_MARK,))

    db.write(done_)
    return 0
