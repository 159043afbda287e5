"""Rate limits and failed-login back-off kept in the database (table `httpLimits`, migration 022), so
every `serve` worker and replica on one database spends one budget (issue #31; they lived in each
process's memory, so N processes allowed N times the rate).

- A `Bucket` is a token bucket: `burst` requests at once, refilled at `per_minute`, per client
  address (or one for all addresses together: `per_address=False`).
- The back-off: after `free` failed client authentications from an address, each further failure
  locks it out for 1 s, 2 s, 4 s … up to `max_seconds`; a success clears it.
Each decision is one write transaction (SQLite `BEGIN IMMEDIATE`, PostgreSQL `SERIALIZABLE` with
retries), so two processes never spend the same token. Times are Unix ms (replicas on several hosts
share them; a clock behind another never refills a bucket backwards). Rows untouched for an hour are
pruned now and then.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

PRUNE_AFTER_MS = 3_600_000
PRUNE_CHANCE = 0.02


@dataclass(frozen=True)
class Bucket:
    name: str
    per_minute: float
    burst: float
    per_address: bool = True
    what: str = "requests"  # what a refusal says there were too many of

    def key(self, address: str) -> str:
        return f"{self.name}|{address if self.per_address else '*'}"


def bucket(name: str, per_minute: float, *, per_address: bool = True, what: str = "requests") -> Bucket:
    return Bucket(name, per_minute, float(max(1, int(per_minute))), per_address, what)


def _take(conn: Any, b: Bucket, address: str, now: int) -> float | None:
    """Spend one token of `b` for `address`; None when allowed, else the seconds until one is there."""
    key = b.key(address)
    row = conn.one("SELECT tokens, updatedAt FROM httpLimits WHERE key = ?", (key,))
    rate = b.per_minute / 60_000.0  # tokens per ms
    tokens = b.burst if row is None else min(b.burst, row["tokens"] + max(0, now - row["updatedAt"]) * rate)
    wait = None
    if tokens >= 1:
        tokens -= 1
    else:
        wait = (1 - tokens) / rate / 1000 if rate > 0 else 3600.0
    conn.execute("INSERT INTO httpLimits (key, tokens, updatedAt) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE "
                 "SET tokens = excluded.tokens, updatedAt = excluded.updatedAt", (key, tokens, now))
    return wait


class LimitStore:
    """The buckets and back-off of one database (any number of processes share them)."""

    def __init__(self, db: Any, *, free: int = 5, max_seconds: float = 300.0) -> None:
        self.db = db
        self.free = free
        self.max_seconds = max_seconds

    @staticmethod
    def _now(now: float | None) -> int:
        return int((time.time() if now is None else now) * 1000)

    def admit(self, address: str, buckets: Sequence[Bucket], *, backoff: bool = False,
              now: float | None = None) -> tuple[float, str] | None:
        """None when the request may go on; else (seconds to wait, what there were too many of).
        Buckets are taken in order and the first refusal stops (as the in-memory limits did)."""
        at = self._now(now)

        def decide(conn: Any) -> tuple[float, str] | None:
            if random.random() < PRUNE_CHANCE:
                conn.execute("DELETE FROM httpLimits WHERE updatedAt < ? AND lockedUntil < ?",
                             (at - PRUNE_AFTER_MS, at))
            if backoff:
                until = conn.scalar("SELECT lockedUntil FROM httpLimits WHERE key = ?", (f"backoff|{address}",))
                if until is not None and until > at:
                    return (until - at) / 1000, "failed client authentications"
            for b in buckets:
                wait = _take(conn, b, address, at)
                if wait is not None:
                    return wait, b.what
            return None

        return self.db.write(decide)

    def locked(self, address: str, now: float | None = None) -> float | None:
        at = self._now(now)
        until = self.db.read(lambda c: c.scalar("SELECT lockedUntil FROM httpLimits WHERE key = ?",
                                                (f"backoff|{address}",)))
        return (until - at) / 1000 if until is not None and until > at else None

    def failed(self, address: str, now: float | None = None) -> None:
        at = self._now(now)
        key = f"backoff|{address}"

        def count(conn: Any) -> None:
            failures = int(conn.scalar("SELECT failures FROM httpLimits WHERE key = ?", (key,)) or 0) + 1
            over = failures - self.free
            until = at + int(min(self.max_seconds, 2.0 ** (over - 1)) * 1000) if over > 0 else 0
            conn.execute("INSERT INTO httpLimits (key, failures, lockedUntil, updatedAt) VALUES (?, ?, ?, ?) "
                         "ON CONFLICT (key) DO UPDATE SET failures = excluded.failures, "
                         "lockedUntil = excluded.lockedUntil, updatedAt = excluded.updatedAt",
                         (key, failures, until, at))

        self.db.write(count)

    def succeeded(self, address: str) -> None:
        key = f"backoff|{address}"
        if self.db.read(lambda c: c.one("SELECT 1 FROM httpLimits WHERE key = ?", (key,))) is not None:
            self.db.write(lambda c: c.execute("DELETE FROM httpLimits WHERE key = ?", (key,)))  # rare: no write else
