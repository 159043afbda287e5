"""Several OS processes on one database: spending never overshoots, upserts and revisions stay consistent.

Each worker opens its own Database on the shared file (or the same PostgreSQL database) and runs
the same store functions the tools run, each call in its own `db.write` transaction.
"""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest
from conftest import make_settings

from vantage_peers.core.errors import VantageError
from vantage_peers.db import open_database
from vantage_peers.domains.components import store as components
from vantage_peers.domains.diary import store as diary
from vantage_peers.domains.mandates import store as mandates

WORKERS = 4
ROUNDS = 15

pytestmark = [pytest.mark.backends, pytest.mark.slow]  # slow: several processes


def _worker(path: str, url: str | None, mandate_id: str, worker: int, queue) -> None:
    db = open_database(make_settings(Path(path), database_url=url))
    recorded = refused = 0
    try:
        for i in range(ROUNDS):
            def spend(c):
                return mandates.update(c, mandate_id=mandate_id, caller="alice", terms={},
                                       spend={"amount": 3, "category": None, "note": f"w{worker}"}, status=None)
            try:
                db.write(spend)
                recorded += 1
            except VantageError as err:
                assert err.code == "SPENDING_DENIED", err
                refused += 1
            db.write(lambda c, i=i: components.register(
                c, name="shared-hook", type_="hook", content=f"w{worker} r{i}", created_by=f"w{worker}",
                team=None, version=None, project=None))
            db.write(lambda c, i=i: diary.write_diary(c, date="2026-05-29", orchestrator="sigma",
                                                      content=f"w{worker} r{i}"))
        queue.put((recorded, refused))
    finally:
        db.close()


def test_processes_share_one_database_consistently(db, settings):  # `db` stays open beside the workers
    m = db.write(lambda c: mandates.create(c, values={
        "requestedBy": "bob", "fulfilledBy": "alice", "service": "s", "budget": 100,
        "spendingLimits": {"maxPerTransaction": 5}}))
    db.write(lambda c: mandates.transition(c, mandates.MANDATES.require(c, m["_id"]), target="accepted",
                                           caller="alice"))

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(settings.db_path), settings.database_url, m["_id"], w, queue))
             for w in range(WORKERS)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0

    recorded = sum(r for r, _ in results)
    assert recorded == 33 and sum(f for _, f in results) == WORKERS * ROUNDS - 33  # 33 × 3 = 99 ≤ 100 < 102
    row = db.read(lambda c: mandates.MANDATES.require(c, m["_id"]))
    assert row["spent"] == 99
    assert db.read(lambda c: c.scalar("SELECT sum(amount) FROM mandateSpending")) == 99
    revisions = db.read(lambda c: [r["revision"] for r in c.query(
        "SELECT revision FROM componentRevisions ORDER BY revision")])
    assert revisions == list(range(1, WORKERS * ROUNDS + 1))
    latest = db.read(lambda c: components.find(c, name="shared-hook", type_="hook"))
    assert latest["revision"] == WORKERS * ROUNDS
    assert db.read(lambda c: c.scalar("SELECT count(*) FROM diary")) == 1
