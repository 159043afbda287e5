"""The embedding worker: turns queued embedding jobs into vectors, in batches, off the write path.

It serves every corpus the app registered (`app.add_corpus`, search/corpus.py): memories
(`embeddingJobs`, `memories_vec`) and fix patterns, taking a batch from each in turn.
1. Claim up to `batch` due jobs with a lease, decided in one UPDATE (processes never share a job).
2. Embed their texts over the network, outside any transaction.
3. Success: in one transaction, write the vectors and delete the jobs still leased by us (a job
   whose row changed meanwhile was reset by a trigger and is left for the next round).
   Failure: bump `attempts`, push `nextAttemptAt` back exponentially, release the lease. Jobs are
   never dropped, so an endpoint outage loses nothing; they are retried when it comes back.
A batch the endpoint refuses as a whole with 400/413/422 is retried one item at a time, so one
unembeddable row cannot hold back the others; a long item refused alone is retried once cut to
SAFE_INPUT_BYTES (over the model's token limit despite the estimate in `prepare`).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from ...core.ids import now_ms
from ...db import Connection, Database
from ...embedding.embeddings import (
    BATCH_TIMEOUT_S,
    PER_ITEM_STATUSES,
    SAFE_INPUT_BYTES,
    Embedder,
    EmbeddingError,
    shorten,
)
from ...embedding.loadable import source_of
from ...search import vector_switch, vectors
from ...search.corpus import Corpus
from .vectors import MEMORIES as MEMORY_VECTORS

log = logging.getLogger("vantage_peers.embeddings")

BATCH = 64
LEASE_MS = int(BATCH_TIMEOUT_S * 1000) * 4
BASE_BACKOFF_MS = 5_000
MAX_BACKOFF_MS = 15 * 60_000
BUDGET_S = 20.0  # one scheduler tick spends at most this long embedding

MEMORIES = Corpus(
    name="memories", source="memories", text_sql="content", jobs="embeddingJobs", key="memorySeq",
    vec=MEMORY_VECTORS,
    meta_sql=("namespace", "type", "isLatest", f"coalesce(expiresAt, {vectors.NO_EXPIRY})"),
)


def corpora_of(corpora: Sequence[Corpus] | None) -> list[Corpus]:
    """The corpora to serve: those an app registered (`app.corpora`), memories first; else the memories alone."""
    return sorted(corpora, key=lambda c: c is not MEMORIES) if corpora is not None else [MEMORIES]


def backoff_ms(attempts: int) -> int:
    base = min(BASE_BACKOFF_MS * (2 ** max(attempts - 1, 0)), MAX_BACKOFF_MS)
    return int(base * (0.8 + 0.4 * random.random()))


def claim(conn: Connection, *, owner: str, now: int, limit: int, corpus: Corpus = MEMORIES) -> list[dict[str, Any]]:
    rows = conn.query(
        f"UPDATE {corpus.jobs} SET leaseOwner = ?, leaseUntil = ? WHERE seq IN ("
        f"SELECT seq FROM {corpus.jobs} WHERE nextAttemptAt <= ? AND (leaseUntil IS NULL OR leaseUntil <= ?) "
        f"ORDER BY nextAttemptAt, seq LIMIT ?) RETURNING {corpus.key} AS seq, attempts",
        (owner, now + LEASE_MS, now, now, limit),
    )
    if not rows:
        return []
    attempts = {r["seq"]: r["attempts"] for r in rows}
    marks = ",".join("?" for _ in attempts)
    found = conn.query(f"SELECT seq, {corpus.text_sql} AS content FROM {corpus.source} WHERE seq IN ({marks}) "
                       "ORDER BY seq", list(attempts))
    return [{"seq": r["seq"], "content": r["content"], "attempts": attempts[r["seq"]]} for r in found]


def _store(conn: Connection, *, corpus: Corpus, owner: str, model: str, pairs: list[tuple[int, list[float]]],
           source: str | None = None) -> int:
    """Write vectors for the jobs we still hold; returns how many were written."""
    marks = ",".join("?" for _ in pairs)
    held = {r["seq"] for r in conn.query(
        f"DELETE FROM {corpus.jobs} WHERE {corpus.key} IN ({marks}) AND leaseOwner = ? RETURNING {corpus.key} AS seq",
        [*(seq for seq, _ in pairs), owner])}
    if not held:
        return 0
    target = vectors.ensure(conn, model, len(pairs[0][1]), corpus.vec)  # the staged table during a switch
    vectors.record_source(conn, model, source)
    cols = ", ".join(f"{expr} AS c{i}" for i, expr in enumerate(corpus.meta_sql))
    meta = {r["seq"]: tuple(r[f"c{i}"] for i in range(len(corpus.meta_sql))) for r in conn.query(
        f"SELECT seq, {cols} FROM {corpus.source} WHERE seq IN ({','.join('?' for _ in held)})", list(held))}
    # A zero or non-finite vector (an endpoint's answer to an empty-ish text) is not stored: its cosine
    # distance is undefined. The row stays findable by keyword; its job is done (a retry gives the same).
    usable = [(seq, meta[seq], vec) for seq, vec in pairs if seq in meta and not vectors.unusable(vec)]
    if len(usable) < len(held):
        log.warning("%d %s without a usable vector (zero or non-finite): keyword search only",
                    len(held) - len(usable), corpus.name)
    vectors.replace(conn, target, usable)
    return len(held)


def _fail(conn: Connection, *, corpus: Corpus, owner: str, jobs: list[dict[str, Any]], error: str, now: int) -> None:
    conn.executemany(
        f"UPDATE {corpus.jobs} SET attempts = attempts + 1, nextAttemptAt = ?, lastError = ?, leaseOwner = NULL, "
        f"leaseUntil = NULL WHERE {corpus.key} = ? AND leaseOwner = ?",
        [(now + backoff_ms(j["attempts"] + 1), error[:500], j["seq"], owner) for j in jobs],
    )


def _embed_group(db: Database, embedder: Embedder, owner: str, jobs: list[dict[str, Any]],
                 clock: Callable[[], int], corpus: Corpus) -> tuple[int, int, EmbeddingError | None]:
    """Embed and store `jobs`; returns (embedded, failed, last error)."""
    try:
        vecs = embedder.embed([j["content"] for j in jobs], timeout=BATCH_TIMEOUT_S)
    except EmbeddingError as exc:
        if exc.status in PER_ITEM_STATUSES and len(jobs) == 1 and not jobs[0].get("shortened") \
                and len(jobs[0]["content"].encode("utf-8", "surrogatepass")) > SAFE_INPUT_BYTES:
            # Refused alone and long: most likely over the model's token limit; a shorter prefix
            # still gives the memory a vector instead of failing it forever.
            short = {**jobs[0], "content": shorten(jobs[0]["content"]), "shortened": True}
            return _embed_group(db, embedder, owner, [short], clock, corpus)
        if exc.status in PER_ITEM_STATUSES and len(jobs) > 1:
            done = failed = 0
            last: EmbeddingError | None = None
            for job in jobs:
                d, f, err = _embed_group(db, embedder, owner, [job], clock, corpus)
                done, failed, last = done + d, failed + f, err or last
            return done, failed, last
        error = exc
        db.write(lambda c: _fail(c, corpus=corpus, owner=owner, jobs=jobs, error=str(error), now=clock()))
        return 0, len(jobs), error
    pairs = [(j["seq"], v) for j, v in zip(jobs, vecs, strict=True)]
    try:
        source = source_of(embedder)
        return db.write(lambda c: _store(c, corpus=corpus, owner=owner, model=embedder.model, pairs=pairs,
                                         source=source)), 0, None
    except vectors.ModelMismatch as exc:
        message = str(exc)
        db.write(lambda c: _fail(c, corpus=corpus, owner=owner, jobs=jobs, error=message, now=clock()))
        return 0, len(jobs), EmbeddingError(message)


def embed_pending(
    db: Database,
    embedder: Embedder | None,
    *,
    owner: str,
    now: Callable[[], int] | None = None,
    batch: int = BATCH,
    budget_s: float = BUDGET_S,
    on_progress: Callable[[int], None] | None = None,
    corpora: Sequence[Corpus] | None = None,
) -> dict[str, Any]:
    """Embed due jobs of every corpus in `corpora` (the app's; default the memories), a batch of each
    in turn, until none are due, the endpoint fails, or the time budget is spent."""
    clock = now or now_ms
    result: dict[str, Any] = {"embedded": 0, "failed": 0}
    if embedder is None:
        result["skipped"] = "embeddings are off"
        return result
    problem = db.read(lambda c: vectors.mismatch(c, embedder.model, embedder.dimensions))
    if problem:
        log.warning("embedding jobs paused: %s", problem)
        result["skipped"] = problem
        return result
    started = time.monotonic()
    active = corpora_of(corpora)
    while active and time.monotonic() - started < budget_s:
        for corpus in list(active):
            jobs = db.write(lambda c, corpus=corpus: claim(c, owner=owner, now=clock(), limit=batch, corpus=corpus))
            if not jobs:
                active.remove(corpus)
                continue
            done, failed, err = _embed_group(db, embedder, owner, jobs, clock, corpus)
            result["embedded"] += done
            result["failed"] += failed
            if on_progress is not None:
                on_progress(done)
            if err is not None and err.status not in PER_ITEM_STATUSES:
                result["error"] = str(err)
                log.warning("embedding batch failed, %d job(s) will be retried: %s", failed, err)
                return result  # the endpoint is down or refusing us: wait for the backoff, don't hammer it
    if db.read(vectors.switch_target) == embedder.model:  # a switch to this model: done when nothing is left
        result["switched"] = db.write(lambda c: vector_switch.finish(c, corpora_of(corpora), embedder.model))
    return result


def pending(conn: Connection, corpora: Sequence[Corpus] | None = None) -> dict[str, Any]:
    """Queue health over every corpus: `pending` in total and `byCorpus`, worst attempts, last error."""
    out: dict[str, Any] = {"pending": 0, "byCorpus": {}}
    for corpus in corpora_of(corpora):
        row = conn.one(f"SELECT count(*) AS n, max(attempts) AS worst, min(createdAt) AS oldest FROM {corpus.jobs}")
        if not row or not row["n"]:
            continue
        out["pending"] += row["n"]
        out["byCorpus"][corpus.name] = row["n"]
        out["maxAttempts"] = max(out.get("maxAttempts", 0), row["worst"])
        out["oldestCreatedAt"] = min(out.get("oldestCreatedAt", row["oldest"]), row["oldest"])
        err = conn.scalar(f"SELECT lastError FROM {corpus.jobs} WHERE lastError IS NOT NULL ORDER BY seq DESC LIMIT 1")
        if err and "lastError" not in out:
            out["lastError"] = err
    return out


def retry_now(conn: Connection, corpora: Sequence[Corpus] | None = None) -> None:
    """Make every unleased job due now (reindex: a person is waiting, skip the background backoff)."""
    for corpus in corpora_of(corpora):
        conn.execute(f"UPDATE {corpus.jobs} SET nextAttemptAt = 0 WHERE leaseOwner IS NULL")


def reset_all(conn: Connection, corpora: Sequence[Corpus] | None = None) -> int:
    """Forget every vector and queue every row of every corpus for embedding (what `reindex` starts with)."""
    vectors.drop(conn, [c.vec for c in corpora_of(corpora)])
    return queue_all(conn, corpora)


def queue_all(conn: Connection, corpora: Sequence[Corpus] | None = None) -> int:
    """Queue every row of every corpus for embedding; returns how many (a switch keeps the old vectors)."""
    everything = corpora_of(corpora)
    now = now_ms()
    total = 0
    for corpus in everything:
        conn.execute(f"DELETE FROM {corpus.jobs}")
        conn.execute(f"INSERT INTO {corpus.jobs} ({corpus.key}, nextAttemptAt, createdAt) "
                     f"SELECT seq, ?, ? FROM {corpus.source}", (now, now))
        total += int(conn.scalar(f"SELECT count(*) FROM {corpus.jobs}"))
    return total
