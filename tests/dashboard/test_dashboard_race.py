"""A person's action and the agents race across OS processes on one file: each dashboard action
is decided in one transaction, so exactly one of the racers wins and the audit matches."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from vantage_peers.server import create_app

pytestmark = pytest.mark.backends

# Each racer process waits for the same start instant, then acts once and prints what happened.
RACER = """
import sys, time
from vantage_peers.db import open_database
from vantage_peers.pipeline.settings import Settings
from vantage_peers.core.errors import VantageError
env = {"VP_DB_PATH": sys.argv[1], "VP_EMBEDDINGS": "none", "VP_SCHEDULER": "off"}
if sys.argv[6]:
    env["VP_DATABASE_URL"] = sys.argv[6]
settings = Settings.from_env(env, dotenv=False)
db = open_database(settings)
kind, task_id, start = sys.argv[2], sys.argv[3], float(sys.argv[4])
time.sleep(max(0.0, start - time.time()))
try:
    if kind == "human":
        from vantage_peers.dashboard import actions
        actions.release_claim(db, actions.Operator(sys.argv[5], "loopback"), settings, task_id=task_id)
    else:
        from vantage_peers.domains.tasks import lifecycle
        from vantage_peers.core.ids import now_ms
        db.write(lambda c: lifecycle.pause_task(c, task_id=task_id, caller=sys.argv[5], now=now_ms()))
    print("won")
except VantageError as exc:
    print("lost", exc.code)
db.close()
"""


@pytest.mark.slow
def test_releases_and_the_agents_pause_race_one_winner(settings):
    """Release needs in_progress, pause needs the open segment: whichever commits first, the others lose."""
    path = settings.db_path
    app = create_app(settings)
    from vantage_peers.domains.tasks import store

    task_id = app.db.write(lambda c: store.create_task(c, payload={
        "title": "contested", "assignedTo": "bob", "createdBy": "alice", "priority": "high",
        "status": "in_progress"}))
    app.db.close()
    start = time.time() + 4.0  # every racer has imported by then
    racers = [("human", f"op{i}") for i in range(3)] + [("agent", "bob")] * 2
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(path), kind, task_id, str(start), who,
                               settings.database_url or ""], stdout=subprocess.PIPE, text=True)
             for kind, who in racers]
    outcomes = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert outcomes.count("won") == 1, outcomes
    assert all(o == "won" or o == "lost INVALID_STATE" for o in outcomes), outcomes
    app = create_app(settings)
    try:
        task = app.db.read(lambda c: c.one("SELECT status, paused FROM tasks WHERE id = ?", (task_id,)))
        audit = app.db.read(lambda c: c.query("SELECT actor, action FROM humanActions"))
        segments = app.db.read(lambda c: c.scalar("SELECT count(*) FROM taskSegments WHERE endedAt IS NULL"))
    finally:
        app.db.close()
    winner = racers[outcomes.index("won")]
    if winner[0] == "human":
        assert (task["status"], task["paused"]) == ("todo", 0) and [dict(a) for a in audit] == [
            {"actor": f"human:{winner[1]}", "action": "release_claim"}]
    else:
        assert (task["status"], task["paused"]) == ("todo", 1) and audit == []
    assert segments == 0  # whoever won, the work segment was closed exactly once
