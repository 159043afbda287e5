"""Liveness of server processes and leases inherited across a restart (issue #30, docs/presence.md).

Real stdio servers (`vantage-peers`) on one database, SQLite and PostgreSQL: a worker holding a claim
and path reservations is SIGKILLed; `status` and the dashboard show it gone while a live process shows
live; restarted with the same identity, its first answer lists what it held (ids, states) and whoami
lists it on demand; a clean stop marks the process stopped. Times are never asserted: only states,
with generous bounds on how long to wait for them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import make_settings
from support.faults_helpers import StdioProc, script

from vantage_peers.core.ids import now_ms
from vantage_peers.dashboard import queries as dashboard
from vantage_peers.db import migrate, open_database
from vantage_peers.db.migrate import steps
from vantage_peers.domains.leases import store as leases
from vantage_peers.domains.profiles import processes
from vantage_peers.server import create_app
from vantage_peers.status import collect, render

pytestmark = pytest.mark.backends

WAIT_S = 120  # a bound on waiting for a state on a loaded machine, never an expectation


def start(db_path: Path, database_url: str | None, who: str, instance: str | None = None, *,
          beat: str = "0.2", **env: str) -> StdioProc:
    full = {"VP_ORCHESTRATOR": who, "VP_HEARTBEAT_SECONDS": beat, "VP_PRESENCE_INTERVAL_SECONDS": "0", **env}
    if instance:
        full["VP_INSTANCE_ID"] = instance
    if database_url:
        full["VP_DATABASE_URL"] = database_url
    return StdioProc(db_path, env=full)


def ok(proc: StdioProc, tool: str, **args: Any) -> dict[str, Any]:
    is_error, text, data = proc.call(tool, **args)
    assert not is_error, text
    return data if data is not None else json.loads(text)


def kill(proc: StdioProc) -> None:
    os.kill(proc.proc.pid, signal.SIGKILL)
    proc.proc.wait(30)  # reaped: a zombie is no process
    proc.close()


def peer(data: dict[str, Any], who: str, instance: str = "") -> dict[str, Any]:
    return next(p for p in data["peers"] if (p["orchestratorId"], p["instanceId"] or "") == (who, instance))


def wait_for(fn, what: str):
    deadline = time.monotonic() + WAIT_S
    while True:
        value = fn()
        if value:
            return value
        assert time.monotonic() < deadline, f"still not {what} after {WAIT_S}s"
        time.sleep(0.2)


def logged(proc: StdioProc) -> str:
    """The process's stderr with whitespace collapsed (the log handler wraps lines)."""
    return " ".join(proc.stderr_path.read_text(errors="replace").split())


def status_json(db_path: Path, database_url: str | None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("VP_ORCHESTRATOR", "VP_DATABASE_URL")}
    env.update(VP_DB_PATH=str(db_path), VP_EMBEDDINGS="none", **({"VP_DATABASE_URL": database_url} if database_url else {}))
    done = subprocess.run([script(), "status", "--json"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def team(app, **filters: Any) -> dict[tuple[str, str], str]:
    page = app.db.read(lambda c: dashboard.team(c, now=now_ms(), state=filters.get("state"), who=None, cursor=None))
    return {(i["orchestratorId"], i["instanceId"] or ""): i["presence"] for i in page["items"]}


def test_a_killed_worker_is_gone_and_its_restart_is_told_what_it_held(settings, db_path, database_url):
    app = create_app(settings)  # the observer: status and the dashboard's query, in this process
    boss = start(db_path, database_url, "boss", beat="1")
    procs = [boss]
    try:
        tid = ok(boss, "create_task", title="ship it", assignedTo="w1", priority="high")["result"]
        w1 = start(db_path, database_url, "w1", "i1")
        procs.append(w1)
        ok(w1, "set_summary", summary="working")
        ok(w1, "checkout_task", taskId=tid)
        held_path = ok(w1, "reserve_paths", paths=["src/**"], repo="o/r")["granted"][0]["id"]
        lapsing = ok(w1, "reserve_paths", paths=["lib/**"], repo="o/r", ttlSeconds=1)["granted"][0]["id"]
        taken = ok(w1, "reserve_paths", paths=["docs/**"], repo="o/r", ttlSeconds=1)["granted"][0]["id"]
        first_session = ok(w1, "whoami")["session"]
        assert peer(collect(app), "w1", "i1")["live"] is True

        kill(w1)
        # Gone (here at once: its pid is gone; elsewhere once its heartbeat window is over); boss stays live.
        wait_for(lambda: not peer(collect(app), "w1", "i1")["live"], "gone")
        data = collect(app)
        assert peer(data, "boss")["live"] is True and peer(data, "boss")["processes"] == 1
        line = next(x for x in render(data).splitlines() if x.lstrip().startswith("w1/i1"))
        assert "GONE" in line and "LIVE" not in line
        assert "LIVE" in next(x for x in render(data).splitlines() if x.lstrip().startswith("boss "))
        cli = status_json(db_path, database_url)
        assert peer(cli, "w1", "i1")["live"] is False and peer(cli, "boss")["live"] is True
        gone = next(p for p in cli["processes"] if p["session"] == first_session)
        assert gone["live"] is False and "stoppedAt" not in gone  # killed: no clean stop
        assert team(app)[("w1", "i1")] == "gone" and team(app)[("boss", "")] == "online"
        # The dashboard's filters go by the heartbeats alone: after the window.
        wait_for(lambda: ("w1", "i1") in team(app, state="gone"), "filtered as gone")
        assert ("w1", "i1") not in team(app, state="online") and ("boss", "") in team(app, state="online")

        # docs/** lapses and boss takes it; lib/** lapses; the claim and src/** are still in force.
        wait_for(lambda: app.db.read(lambda c: not leases.in_force(leases.by_ids(c, [taken])[0], now_ms())), "lapsed")
        assert ok(boss, "reserve_paths", paths=["docs/**"], repo="o/r")["granted"]
        claim = app.db.read(lambda c: leases.latest(c, kind="task", scope="", key=tid))

        # Restarted with the same identity: the first answer lists what the dead process held.
        w1b = start(db_path, database_url, "w1", "i1")
        procs.append(w1b)
        first = ok(w1b, "set_summary", summary="back")
        states = {i["id"]: i["state"] for i in first["inheritedLeases"]}
        assert states == {claim["id"]: "held", held_path: "held", lapsing: "lapsed", taken: "taken"}
        by_id = {i["id"]: i for i in first["inheritedLeases"]}
        assert by_id[claim["id"]]["kind"] == "task" and by_id[claim["id"]]["key"] == tid
        assert by_id[held_path]["key"] == "src/**" and by_id[held_path]["repo"] == "o/r"
        assert by_id[taken]["takenBy"] == "boss" and by_id[claim["id"]]["session"] == first_session
        assert any("renew_task_claim" in w and "release_paths" in w for w in first["warnings"])
        who = ok(w1b, "whoami")
        assert {i["id"]: i["state"] for i in who["inheritedLeases"]} == states and who["session"] != first_session
        assert "inheritedLeases" not in ok(w1b, "list_tasks")  # told once

        # Not adopted: this process's calls do not renew them; renewing by hand does (resume).
        after = app.db.read(lambda c: leases.by_ids(c, [claim["id"]])[0])
        assert after["expiresAt"] == claim["expiresAt"]
        ok(w1b, "renew_task_claim", taskId=tid)
        assert [x["id"] for x in ok(w1b, "renew_path_reservations", ids=[lapsing])["notRenewed"]] == [lapsing]
        assert ok(w1b, "release_paths", ids=[held_path])["count"] == 1
        left = {i["id"]: i["state"] for i in ok(w1b, "whoami")["inheritedLeases"]}
        assert left == {lapsing: "lapsed", taken: "taken"}

        # A clean stop marks the process stopped; the next start is told nothing already told.
        second_session = who["session"]
        assert w1b.close() == 0
        row = app.db.read(lambda c: processes.get(c, second_session))
        assert row["stoppedAt"] is not None and not processes.is_live(row, now_ms())
        assert peer(collect(app), "w1", "i1")["live"] is False
        w1c = start(db_path, database_url, "w1", "i1")
        procs.append(w1c)
        third = ok(w1c, "set_summary", summary="again")
        # The claim renewed by the stopped process is now its to inherit; lapsed/taken ones were told.
        assert [(i["id"], i["state"]) for i in third["inheritedLeases"]] == [(claim["id"], "held")]
        assert peer(collect(app), "w1", "i1")["live"] is True
    finally:
        for p in procs:
            p.close()
        app.db.close()


def test_a_restart_right_after_a_kill_is_told_at_once(settings, db_path, database_url):
    """On the same machine the dead pid tells: no need to wait for the heartbeat window (here 65 s)."""
    app = create_app(settings)
    w1 = start(db_path, database_url, "w1", "i1", beat="30")
    procs = [w1]
    try:
        granted = ok(w1, "reserve_paths", paths=["src/**"], repo="o/r")["granted"][0]["id"]
        kill(w1)
        w1b = start(db_path, database_url, "w1", "i1", beat="30")
        procs.append(w1b)
        first = ok(w1b, "list_peers")
        assert [(i["id"], i["state"]) for i in first["inheritedLeases"]] == [(granted, "held")]
        mine = next(i for i in first["items"] if i["orchestratorId"] == "w1")
        assert mine["live"] is True and mine["processes"] == 1  # the killed one is not counted (its pid is gone)
    finally:
        for p in procs:
            p.close()
        app.db.close()


def test_a_second_live_process_of_the_identity_keeps_its_leases(settings, db_path, database_url):
    """Two live processes of one identity: neither is told the other's leases are inherited."""
    a = start(db_path, database_url, "w1", "i1")
    b = start(db_path, database_url, "w1", "i1")
    try:
        ok(a, "reserve_paths", paths=["src/**"], repo="o/r")
        assert "inheritedLeases" not in ok(b, "set_summary", summary="twin")
        assert ok(b, "whoami")["inheritedLeases"] == []
        peers = ok(b, "get_profile", orchestratorId="w1")["result"]["instances"]
        assert peers[0]["live"] is True and peers[0]["processes"] == 2
    finally:
        a.close()
        b.close()


@pytest.mark.sqlite_only
def test_the_heartbeat_survives_a_locked_database(db_path, tmp_path):
    """A write lock held for several beats: beats are skipped and logged, the server answers, then beats again."""
    import apsw

    w1 = start(db_path, None, "w1", "i1")
    try:
        session = ok(w1, "whoami")["session"]
        settings = make_settings(db_path)
        db = open_database(settings)
        before = db.read(lambda c: processes.get(c, session))["heartbeatAt"]
        lock = apsw.Connection(str(db_path))
        lock.execute("BEGIN IMMEDIATE")
        try:
            wait_for(lambda: "skipped (Busy" in logged(w1), "logged")
        finally:
            lock.execute("COMMIT")
            lock.close()
        assert w1.proc.poll() is None
        assert ok(w1, "set_summary", summary="still here")["ok"] is True
        wait_for(lambda: db.read(lambda c: processes.get(c, session))["heartbeatAt"] > before, "beating again")
        wait_for(lambda: "back after" in logged(w1), "recovered")
        db.close()
    finally:
        w1.close()


# -- in process: the same rules without OS processes ----------------------------------------------

def test_presence_renews_only_this_process_s_leases_and_renewal_adopts(settings, db_path, database_url):
    from conftest import open_tools

    app = create_app(settings.model_copy(update={"orchestrator": "w1", "instance_id": "i1",
                                                 "presence_interval_seconds": 0}))
    try:
        with open_tools(app) as tools:
            mine = tools.call("reserve_paths", paths=["src/**"], repo="o/r")["granted"][0]["id"]
            theirs = tools.call("reserve_paths", paths=["lib/**"], repo="o/r")["granted"][0]["id"]
            # As if `theirs` were granted by a process that died long ago.
            app.db.write(lambda c: c.execute("UPDATE agentLeases SET holderSession = 'ses_dead', "
                                             "expiresAt = expiresAt - 60000 WHERE id = ?", (theirs,)))
            before = app.db.read(lambda c: {r["id"]: r["expiresAt"] for r in leases.by_ids(c, [mine, theirs])})
            tools.call("list_tasks")
            after = app.db.read(lambda c: {r["id"]: r["expiresAt"] for r in leases.by_ids(c, [mine, theirs])})
            assert after[mine] >= before[mine] and after[theirs] == before[theirs]
            assert [i["id"] for i in tools.call("whoami")["inheritedLeases"]] == [theirs]
            assert tools.call("renew_path_reservations", ids=[theirs])["renewed"]
            assert tools.call("whoami")["inheritedLeases"] == []
            session = app.db.read(lambda c: c.scalar("SELECT holderSession FROM agentLeases WHERE id = ?", (theirs,)))
            assert session == tools.call("whoami")["session"]
    finally:
        app.db.close()


def test_gone_processes_are_pruned_after_a_day(db):
    now = now_ms()
    old = processes.Me(session="ses_old", orchestrator="w1", instance="", transport="stdio", beat_ms=1000,
                       started_at=now - 3 * processes.PRUNE_AFTER_MS)
    recent = processes.Me(session="ses_recent", orchestrator="w1", instance="", transport="stdio", beat_ms=1000,
                          started_at=now)
    db.write(lambda c: processes.beat(c, old, now - processes.PRUNE_AFTER_MS - 1))
    db.write(lambda c: processes.beat(c, recent, now - 60_000))
    assert db.write(lambda c: processes.prune(c, now)) == 1
    assert db.read(lambda c: processes.get(c, "ses_old")) is None
    assert db.read(lambda c: processes.get(c, "ses_recent")) is not None


# -- the migration --------------------------------------------------------------------------------

def _previous() -> int:
    return max(v for v, _name, _sql in steps() if v < 20)


LEASE_ROW = ("INSERT INTO agentLeases (id, kind, scope, key, holder, holderInstance, ttlMs, fencingToken, grantedAt, "
             "renewedAt, expiresAt) VALUES ('lse_old', 'path', 'o/r', 'src/**', 'w1', 'i1', 1000, 7, 1, 1, 2)")
INSTANCE_ROW = ("INSERT INTO instances (id, orchestratorId, instanceId, lastSeen, createdAt) "
                "VALUES ('ins_old', 'w1', 'i1', 5, 1)")


def _check_upgraded(db) -> None:
    row = db.read(lambda c: c.one("SELECT key, fencingToken, holderSession AS holderSession, noticedBy AS noticedBy "
                                  "FROM agentLeases WHERE id = 'lse_old'"))
    assert row == {"key": "src/**", "fencingToken": 7, "holderSession": None, "noticedBy": None}
    assert db.read(lambda c: c.scalar("SELECT lastSeen FROM instances WHERE id = 'ins_old'")) == 5
    me = processes.Me(session="ses_new", orchestrator="w1", instance="i1", transport="stdio", beat_ms=1000,
                      started_at=now_ms())
    db.write(lambda c: processes.beat(c, me, now_ms()))
    assert processes.is_live(db.read(lambda c: processes.get(c, "ses_new")), now_ms())


@pytest.mark.sqlite_only
def test_migration_020_upgrades_an_older_file_keeping_its_rows(tmp_path):
    from support.migration_helpers import older_file

    from vantage_peers.db import latest_version

    path = older_file(tmp_path / "old.db", _previous(), LEASE_ROW, INSTANCE_ROW)
    db = open_database(make_settings(path))
    try:
        assert db.conn.scalar("PRAGMA user_version") == latest_version() >= 20
        _check_upgraded(db)
    finally:
        db.close()


def test_migration_020_upgrades_an_older_postgres_database():
    from support import postgres

    if postgres.available():
        pytest.skip(postgres.available())

    from vantage_peers.db import latest_version
    from vantage_peers.db.postgres import PgDatabase

    url = postgres.fresh_database(migrated=False)
    try:
        old = PgDatabase(url, pool_size=2)
        assert migrate(old, target=_previous()) <= _previous()  # PostgreSQL has no step for some numbers
        old.write(lambda c: (c.execute(LEASE_ROW), c.execute(INSTANCE_ROW)))
        old.close()
        new = PgDatabase(url, pool_size=2)
        assert migrate(new) == latest_version()
        _check_upgraded(new)
        new.close()
    finally:
        postgres.drop_database(url)
