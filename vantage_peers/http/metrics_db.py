"""The part of `/metrics` read from the database at scrape time (issue #31): what every replica
shares, so any replica answers the same — deliveries, leases, scheduler lag, embedding backlog —
plus this process's database connections. One read transaction per scrape; if it fails the page
still answers, with `vp_database_up 0`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger("vantage_peers.http.metrics")


def _deliveries(c: Any) -> dict[str, int]:
    # pending: waiting for an acknowledgement (nextDeliveryAt is set exactly then, docs/delivery.md)
    row = c.one("SELECT count(nextDeliveryAt) AS pending, "
                "coalesce(sum(CASE WHEN deliveryAttempt > 1 THEN 1 ELSE 0 END), 0) AS redelivered, "
                "count(deadLetteredAt) AS dead FROM messageReceipts")
    return {"pending": int(row["pending"]), "redelivered": int(row["redelivered"]),
            "dead_lettered": int(row["dead"])}


def _leases(c: Any, now: int) -> tuple[list[tuple[str, str, int]], list[tuple[str, int]]]:
    live = c.query("SELECT kind, sum(CASE WHEN expiresAt > ? THEN 1 ELSE 0 END) AS held, "
                   "sum(CASE WHEN expiresAt <= ? THEN 1 ELSE 0 END) AS lapsed "
                   "FROM agentLeases WHERE releasedAt IS NULL GROUP BY kind", (now, now))
    expired = c.query("SELECT kind, count(*) AS n FROM agentLeases WHERE releaseReason = 'expired' GROUP BY kind")
    states = [(r["kind"], s, int(r[s] or 0)) for r in live for s in ("held", "lapsed")]
    return states, [(r["kind"], int(r["n"])) for r in expired]


def _job_lag(c: Any, now: int, tick_ms: int) -> list[tuple[str, float]]:
    """Seconds each job is overdue: past its `nextRunAt` (a cadence), or a tick past its last start."""
    out = []
    for r in c.query("SELECT name, schedule, nextRunAt, lastStartedAt FROM schedulerJobs ORDER BY name"):
        if r["schedule"] == "every tick":
            due = (r["lastStartedAt"] + tick_ms) if r["lastStartedAt"] is not None else None
        else:
            due = r["nextRunAt"] or None
        out.append((r["name"], max(0.0, (now - due) / 1000) if due is not None else 0.0))
    return out


class DatabaseCollector(Collector):
    def __init__(self, app: Any) -> None:
        self.app = app

    def describe(self) -> list[Any]:
        return []  # collected at scrape time only (never at registration)

    def collect(self) -> Iterator[Any]:
        started = time.perf_counter()
        up = GaugeMetricFamily("vp_database_up", "1 when the scrape's read transaction succeeded")
        try:
            data = self.app.db.read(self._read)
        except Exception as exc:  # noqa: BLE001 - the page still answers: the database is down
            log.warning("metrics: database read failed: %s", exc)
            data = None
        up.add_metric([], 1 if data is not None else 0)
        yield up
        if data is not None:
            yield from self._families(data)
        yield from self._pool()
        watch = getattr(self.app.scheduler, "tick_age", None)  # health.WatchedScheduler, when serve runs one
        if watch is not None:
            age = watch()
            if age is not None:
                g = GaugeMetricFamily("vp_scheduler_tick_age_seconds",
                                      "Seconds since this process's scheduler last started a tick")
                g.add_metric([], age)
                yield g
        took = GaugeMetricFamily("vp_metrics_scrape_seconds", "Time the database part of this scrape took")
        took.add_metric([], time.perf_counter() - started)
        yield took

    def _read(self, c: Any) -> dict[str, Any]:
        from ..domains.memory import indexer

        now = int(time.time() * 1000)
        tick_ms = int(self.app.settings.tick_seconds * 1000)
        states, expired = _leases(c, now)
        return {"deliveries": _deliveries(c), "leases": states, "expired": expired,
                "lag": _job_lag(c, now, tick_ms), "backlog": indexer.pending(c, self.app.corpora), "now": now}

    @staticmethod
    def _families(data: dict[str, Any]) -> Iterator[Any]:
        d = GaugeMetricFamily("vp_deliveries", "Message receipts by delivery state: pending (awaiting an "
                              "acknowledgement), redelivered (delivered more than once), dead_lettered", labels=["state"])
        for state, n in data["deliveries"].items():
            d.add_metric([state], n)
        yield d
        leases = GaugeMetricFamily("vp_leases", "Leases not released, by kind and state: held (in force) or "
                                   "lapsed (expired, not yet reclaimed)", labels=["kind", "state"])
        for kind, state, n in data["leases"]:
            leases.add_metric([kind, state], n)
        yield leases
        expired = GaugeMetricFamily("vp_leases_expired", "Leases released because they lapsed (rows kept in "
                                    "agentLeases), by kind", labels=["kind"])
        for kind, n in data["expired"]:
            expired.add_metric([kind], n)
        yield expired
        lag = GaugeMetricFamily("vp_scheduler_job_lag_seconds", "How overdue each background job is (0 when on "
                                "time), across every process sharing the database", labels=["job"])
        for job, seconds in data["lag"]:
            lag.add_metric([job], seconds)
        yield lag
        worst = GaugeMetricFamily("vp_scheduler_lag_seconds", "The most overdue background job's lag")
        worst.add_metric([], max((s for _, s in data["lag"]), default=0.0))
        yield worst
        backlog = data["backlog"]
        b = GaugeMetricFamily("vp_embedding_backlog", "Rows waiting for an embedding, by corpus", labels=["corpus"])
        for corpus, n in backlog.get("byCorpus", {}).items():
            b.add_metric([corpus], n)
        yield b
        oldest = backlog.get("oldestCreatedAt")
        o = GaugeMetricFamily("vp_embedding_backlog_oldest_seconds", "Age of the oldest row waiting for an embedding")
        o.add_metric([], max(0.0, (data["now"] - oldest) / 1000) if oldest else 0.0)
        yield o

    def _pool(self) -> Iterator[Any]:
        db = self.app.db
        pool = getattr(db, "pool", None)
        if pool is not None and hasattr(pool, "get_stats"):  # PostgreSQL: psycopg_pool's own counters
            stats = pool.get_stats()
            g = GaugeMetricFamily("vp_db_pool", "This process's PostgreSQL pool: connections open (size), idle "
                                  "(available) and requests waiting for one", labels=["state"])
            g.add_metric(["size"], stats.get("pool_size", 0))
            g.add_metric(["available"], stats.get("pool_available", 0))
            g.add_metric(["waiting"], stats.get("requests_waiting", 0))
            yield g
            cap = GaugeMetricFamily("vp_db_pool_max", "The pool's maximum size (VP_PG_POOL_SIZE)")
            cap.add_metric([], getattr(pool, "max_size", 0))
            yield cap
        else:  # SQLite: one connection per thread that used the file
            g = GaugeMetricFamily("vp_db_connections_open", "SQLite connections this process holds open")
            g.add_metric([], db.open_connections())
            yield g
