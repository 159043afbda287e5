"""The embedding worker: turns queued `embeddingJobs` into vectors, in batches, off the write path.

1. Claim up to `batch` due jobs with a lease, decided in one UPDATE (processes never share a job).
2. Embed their texts over the network, outside any transaction.
3. Success: in one transaction, write the vectors and delete the jobs still leased by us (a job
   whose memory changed meanwhile was reset by a trigger and is left for the next round).
   Failure: bump `attempts`, push `nextAttemptAt` back exponentially, release the lease. Jobs are
   never dropped, so an endpoint outage loses nothing; they are retried when it comes back.
A batch the endpoint refuses as a whole with 400/413/422 is retried one item at a time, so one
unembeddable memory cannot hold back the others.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

from ...db import Connection, Database
from ...ids import now_ms
from ...search import vectors
from ...search.embeddings import BATCH_TIMEOUT_S, PER_ITEM_STATUSES, Embedder, EmbeddingError

log = logging.getLogger("vantage_peers.embeddings")

BATCH = 64
LEASE_MS = int(BATCH_TIMEOUT_S * 1000) * 4
BASE_BACKOFF_MS = 5_000
MAX_BACKOFF_MS = 15 * 60_000
BUDGET_S = 20.0  # one scheduler tick spends at most this long embedding


def backoff_ms(attempts: int) -> int:
    base = min(BASE_BACKOFF_MS * (2 ** max(attempts - 1, 0)), MAX_BACKOFF_MS)
    return int(base * (0.8 + 0.4 * random.random()))


def claim(conn: Connection, *, owner: str, now: int, limit: int) -> list[dict[str, Any]]:
    rows = conn.query(
        "UPDATE embeddingJobs SET leaseOwner = ?, leaseUntil = ? WHERE seq IN ("
        "SELECT seq FROM embeddingJobs WHERE nextAttemptAt <= ? AND (leaseUntil IS NULL OR leaseUntil <= ?) "
        "ORDER BY nextAttemptAt, seq LIMIT ?) RETURNING memorySeq, attempts",
        (owner, now + LEASE_MS, now, now, limit),
    )
    if not rows:
        return []
    attempts = {r["memorySeq"]: r["attempts"] for r in rows}
    marks = ",".join("?" for _ in attempts)
    found = conn.query(f"SELECT seq, content FROM memories WHERE seq IN ({marks}) ORDER BY seq", list(attempts))
    return [{"seq": r["seq"], "content": r["content"], "attempts": attempts[r["seq"]]} for r in found]


def _store(conn: Connection, *, owner: str, model: str, pairs: list[tuple[int, list[float]]]) -> int:
    """Write vectors for the jobs we still hold; returns how many were written."""
    marks = ",".join("?" for _ in pairs)
    held = {r["memorySeq"] for r in conn.query(
        f"DELETE FROM embeddingJobs WHERE memorySeq IN ({marks}) AND leaseOwner = ? RETURNING memorySeq",
        [*(seq for seq, _ in pairs), owner])}
    if not held:
        return 0
    vectors.ensure(conn, model, len(pairs[0][1]))
    meta = {r["seq"]: r for r in conn.query(
        f"SELECT seq, namespace, type, isLatest, expiresAt FROM memories WHERE seq IN ({','.join('?' for _ in held)})",
        list(held))}
    vectors.upsert(conn, [(seq, meta[seq]["namespace"], meta[seq]["type"], meta[seq]["isLatest"],
                           meta[seq]["expiresAt"], vec) for seq, vec in pairs if seq in meta])
    return len(held)


def _fail(conn: Connection, *, owner: str, jobs: list[dict[str, Any]], error: str, now: int) -> None:
    conn.executemany(
        "UPDATE embeddingJobs SET attempts = attempts + 1, nextAttemptAt = ?, lastError = ?, leaseOwner = NULL, "
        "leaseUntil = NULL WHERE memorySeq = ? AND leaseOwner = ?",
        [(now + backoff_ms(j["attempts"] + 1), error[:500], j["seq"], owner) for j in jobs],
    )


def _embed_group(db: Database, embedder: Embedder, owner: str, jobs: list[dict[str, Any]],
                 clock: Callable[[], int]) -> tuple[int, int, EmbeddingError | None]:
    """Embed and store `jobs`; returns (embedded, failed, last error)."""
    try:
        vecs = embedder.embed([j["content"] for j in jobs], timeout=BATCH_TIMEOUT_S)
    except EmbeddingError as exc:
        if exc.status in PER_ITEM_STATUSES and len(jobs) > 1:
            done = failed = 0
            last: EmbeddingError | None = None
            for job in jobs:
                d, f, err = _embed_group(db, embedder, owner, [job], clock)
                done, failed, last = done + d, failed + f, err or last
            return done, failed, last
        error = exc
        db.write(lambda c: _fail(c, owner=owner, jobs=jobs, error=str(error), now=clock()))
        return 0, len(jobs), error
    pairs = [(j["seq"], v) for j, v in zip(jobs, vecs, strict=True)]
    try:
        return db.write(lambda c: _store(c, owner=owner, model=embedder.model, pairs=pairs)), 0, None
    except vectors.ModelMismatch as exc:
        message = str(exc)
        db.write(lambda c: _fail(c, owner=owner, jobs=jobs, error=message, now=clock()))
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
) -> dict[str, Any]:
    """Embed due jobs until none are due, the endpoint fails, or the time budget is spent."""
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
    while time.monotonic() - started < budget_s:
        jobs = db.write(lambda c: claim(c, owner=owner, now=clock(), limit=batch))
        if not jobs:
            break
        done, failed, err = _embed_group(db, embedder, owner, jobs, clock)
        result["embedded"] += done
        result["failed"] += failed
        if on_progress is not None:
            on_progress(done)
        if err is not None and err.status not in PER_ITEM_STATUSES:
            result["error"] = str(err)
            log.warning("embedding batch failed, %d job(s) will be retried: %s", failed, err)
            break  # the endpoint is down or refusing us: wait for the backoff instead of hammering it
    return result


def pending(conn: Connection) -> dict[str, Any]:
    row = conn.one("SELECT count(*) AS n, max(attempts) AS worst, min(createdAt) AS oldest FROM embeddingJobs")
    out: dict[str, Any] = {"pending": row["n"] if row else 0}
    if row and row["n"]:
        out["maxAttempts"] = row["worst"]
        out["oldestCreatedAt"] = row["oldest"]
        err = conn.scalar("SELECT lastError FROM embeddingJobs WHERE lastError IS NOT NULL ORDER BY seq DESC LIMIT 1")
        if err:
            out["lastError"] = err
    return out


def reset_all(conn: Connection) -> int:
    """Forget every vector and queue every memory for embedding (what `reindex` starts with)."""
    vectors.drop(conn)
    now = now_ms()
    conn.execute("DELETE FROM embeddingJobs")
    conn.execute("INSERT INTO embeddingJobs (memorySeq, nextAttemptAt, createdAt) SELECT seq, ?, ? FROM memories",
                 (now, now))
    return int(conn.scalar("SELECT count(*) FROM embeddingJobs"))
