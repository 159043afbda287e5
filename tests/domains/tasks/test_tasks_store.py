"""Store-level tests of tasks on a temp DB file: time tracking, claims, dependencies, cascade rules."""

from __future__ import annotations

import pytest

from vantage_peers.core.errors import Conflict, Forbidden, InvalidState, NotFound
from vantage_peers.domains.missions import store as missions
from vantage_peers.domains.tasks import issue_links, lifecycle, store
from vantage_peers.domains.tasks.rules import AUTO_GENERATED_SQL, is_auto_generated

pytestmark = pytest.mark.backends

MIN = 60_000
T0 = 1_800_000_000_000


def new_task(db, **over):
    payload = {"title": "t", "assignedTo": "sigma", "priority": "high", "createdBy": "pi", **over}
    return db.write(lambda c: store.create_task(c, payload=payload, now=over.pop("now", None) or T0))


def new_mission(db):
    fields = {"name": "M", "project": "p", "status": "execute", "priority": "high", "pilot": "sigma",
              "agents": ["sigma"], "createdBy": "pi"}
    return db.write(lambda c: missions.create_mission(c, fields=fields, now=T0))


def row(db, task_id):
    return db.read(lambda c: c.one("SELECT * FROM tasks WHERE id = ?", (task_id,)))


def act(db, fn, **kw):
    return db.write(lambda c: fn(c, **kw))


def test_segments_sum_and_startedAt_kept(app):
    db = app.db
    tid = new_task(db)
    act(db, lifecycle.start_task, task_id=tid, caller="sigma", now=T0)
    act(db, lifecycle.pause_task, task_id=tid, caller=None, now=T0 + 10 * MIN)
    r = row(db, tid)
    assert (r["status"], r["paused"], r["assignedTo"]) == ("todo", 1, "sigma")
    # Idle time while paused is not counted; start on a task with worked time resumes.
    act(db, lifecycle.start_task, task_id=tid, caller="sigma", now=T0 + 60 * MIN)
    act(db, lifecycle.pause_task, task_id=tid, caller=None, now=T0 + 65 * MIN)
    act(db, lifecycle.resume_task, task_id=tid, caller=None, now=T0 + 100 * MIN)
    act(db, lifecycle.complete_task, task_id=tid, note="shipped in abc1234", caller="sigma", now=T0 + 110 * MIN,
        max_minutes=480)
    r = row(db, tid)
    assert r["status"] == "done" and r["startedAt"] == T0 and r["completedAt"] == T0 + 110 * MIN
    assert r["actualMinutes"] == 25 and r["durationSource"] == "measured"
    segs = db.read(lambda c: store.get_task(c, task_id=tid))["workSegments"]
    assert [s["minutes"] for s in segs] == [10, 5, 10]


def test_long_segment_refused_and_named(app):
    db = app.db
    tid = new_task(db)
    act(db, lifecycle.start_task, task_id=tid, caller=None, now=T0)
    act(db, lifecycle.pause_task, task_id=tid, caller=None, now=T0 + 10 * MIN)
    act(db, lifecycle.resume_task, task_id=tid, caller=None, now=T0 + 20 * MIN)
    with pytest.raises(InvalidState) as info:
        act(db, lifecycle.complete_task, task_id=tid, note="n", caller=None, now=T0 + 20 * MIN + 481 * MIN,
            max_minutes=480)
    assert "work segment #2" in str(info.value) and "481 min" in str(info.value)
    assert row(db, tid)["status"] == "in_progress"  # nothing recorded
    # A 480-minute segment is allowed; the documented escape records the real time explicitly.
    act(db, lifecycle.update_task, task_id=tid, payload={"status": "done", "actualMinutes": 70, "completionNote": "x"},
        now=T0 + 600 * MIN, max_minutes=480)
    assert row(db, tid)["actualMinutes"] == 70


def test_legacy_duration_is_inferred(app):
    db = app.db
    tid = new_task(db)
    db.write(lambda c: c.execute("UPDATE tasks SET status='in_progress', startedAt=? WHERE id=?", (T0, tid)))
    act(db, lifecycle.complete_task, task_id=tid, note="n", caller=None, now=T0 + 30 * MIN, max_minutes=480)
    r = row(db, tid)
    assert r["actualMinutes"] == 30 and r["durationSource"] == "inferred"


def test_start_refusals(app):
    db = app.db
    a, b = new_task(db), new_task(db)
    act(db, lifecycle.start_task, task_id=a, caller="sigma", now=T0)
    with pytest.raises(InvalidState, match="open work segment.*pause_task.*resume_task"):
        act(db, lifecycle.start_task, task_id=a, caller="sigma", now=T0 + 1)
    with pytest.raises(InvalidState, match=f"another task in progress.*{a}"):
        act(db, lifecycle.start_task, task_id=b, caller="sigma", now=T0 + 2)
    act(db, lifecycle.start_task, task_id=b, caller=None, now=T0 + 3)  # no caller: no per-caller rule
    with pytest.raises(Forbidden):
        act(db, lifecycle.start_task, task_id=new_task(db), caller="tau", now=T0)
    with pytest.raises(NotFound):
        act(db, lifecycle.start_task, task_id="tsk_nope", caller=None, now=T0)


def test_one_open_segment_enforced_by_index(app):
    from vantage_peers.domains.tasks import segments

    db = app.db
    tid = new_task(db)
    act(db, segments.open_segment, task_id=tid, who=None, now=T0)
    with pytest.raises(Exception, match="UNIQUE|unique constraint"):  # SQLite's words, then PostgreSQL's
        act(db, segments.open_segment, task_id=tid, who=None, now=T0 + 1)


def test_checkout_reasons(app):
    db = app.db
    tid = new_task(db)
    assert act(db, lifecycle.checkout_task, task_id=tid, caller="tau", instance="tau-1", now=T0) == {
        "claimed": True, "leaseExpiresAt": T0 + lifecycle.DEFAULT_CLAIM_TTL_MS, "fencingToken": 1}
    r = row(db, tid)
    assert (r["status"], r["assignedTo"], r["assignedToInstance"]) == ("in_progress", "tau", "tau-1")
    lost = act(db, lifecycle.checkout_task, task_id=tid, caller="phi", instance=None, now=T0)
    assert lost["claimed"] is False and "in_progress" in lost["reason"]
    act(db, lifecycle.pause_task, task_id=tid, caller="tau", now=T0 + MIN)
    lost = act(db, lifecycle.checkout_task, task_id=tid, caller="phi", instance=None, now=T0)
    assert lost["claimed"] is False and "paused" in lost["reason"] and "resume_task" in lost["reason"]
    with pytest.raises(NotFound):
        act(db, lifecycle.checkout_task, task_id="tsk_x", caller="phi", instance=None, now=T0)


def test_dependencies_unknown_and_cycles(app):
    db = app.db
    a = new_task(db)
    b = new_task(db, dependsOn=[a])
    c = new_task(db, dependsOn=[b])
    with pytest.raises(NotFound):
        new_task(db, dependsOn=["tsk_missing"])
    with pytest.raises(Conflict, match="cycle"):
        act(db, lifecycle.add_dependency, task_id=a, depends_on=c, caller=None, now=T0)
    with pytest.raises(Exception, match="itself"):
        act(db, lifecycle.add_dependency, task_id=a, depends_on=a, caller=None, now=T0)
    with pytest.raises(Conflict):
        act(db, lifecycle.update_task, task_id=a, payload={"dependsOn": [b]}, now=T0, max_minutes=480)
    doc = db.read(lambda conn: store.get_task(conn, task_id=c))
    assert doc["openDependencies"] == [b]
    act(db, lifecycle.complete_task, task_id=b, note="n", caller=None, now=T0, max_minutes=480)
    assert db.read(lambda conn: store.get_task(conn, task_id=c))["openDependencies"] == []
    # Deleting a task removes it from the others' dependsOn.
    act(db, store.delete_task, task_id=b, caller="pi")
    assert db.read(lambda conn: store.get_task(conn, task_id=c)).get("dependsOn") is None


def test_mission_completes_in_same_transaction(app):
    db = app.db
    m = new_mission(db)
    a, b, x = new_task(db, missionId=m), new_task(db, missionId=m), new_task(db, missionId=m)
    act(db, lifecycle.update_task, task_id=x, payload={"status": "cancelled", "cancelReason": "dup",
                                                       "callerOrchestrator": "pi"}, now=T0, max_minutes=480)
    act(db, lifecycle.complete_task, task_id=a, note="n", caller=None, now=T0, max_minutes=480)
    assert db.read(lambda c: missions.load(c, m))["status"] == "execute"

    def complete_and_read(c):
        lifecycle.complete_task(c, task_id=b, note="n", caller=None, now=T0, max_minutes=480)
        return missions.load(c, m)["status"]

    assert db.write(complete_and_read) == "complete"
    counts = db.read(lambda c: missions.task_counts(c, m))
    assert counts["done"] == 2 and counts["cancelled"] == 1  # cancelled never counted as done


def test_mission_with_only_cancelled_tasks_stays_open(app):
    db = app.db
    m = new_mission(db)
    db.write(lambda c: c.execute("INSERT INTO tasks (id, title, assignedTo, priority, status, missionId, createdBy, "
                                 "createdAt, updatedAt) VALUES ('tsk_c', 't', 's', 'low', 'cancelled', ?, 'pi', 1, 1)",
                                 (m,)))
    assert db.write(lambda c: missions.complete_if_all_done(c, m, T0)) is False


def test_auto_generated_sql_matches_python_predicate(app):
    db = app.db
    cases = [("cron-bot", "x"), ("CRON-daily", "x"), ("cronus", "x"), ("cron", "x"), ("pi", "check-messages"),
             ("pi", "/check-messages"), ("pi", "CHECK-MESSAGES"), ("pi", "check-messages-v2"),
             ("pi", "run check-messages"), ("pi", "/Check-Messages"), ("pi", "check-messages\n"), ("pi", "x")]
    ids = {new_task(db, createdBy=cb, title=t): (cb, t) for cb, t in cases}
    sql_hits = set(db.read(lambda c: [r["id"] for r in c.query(f"SELECT id FROM tasks WHERE {AUTO_GENERATED_SQL}")]))
    for tid, (cb, t) in ids.items():
        assert (tid in sql_hits) == is_auto_generated(cb, t), (cb, t)
    assert sum(is_auto_generated(cb, t) for cb, t in cases) == 6


def test_issue_link_seam(app):
    db = app.db
    calls = []
    app.on_task_done(lambda conn, task: issue_links.link_issues_on_completion(
        conn, task, lambda c, t, numbers, mapping: calls.append((numbers, mapping["repo"]))))
    done = app.task_done
    a = new_task(db, title="Fix #42 and #7", project="studio/x")
    act(db, lifecycle.complete_task, task_id=a, note="fixed in abc1234", caller=None, now=T0, max_minutes=480,
        on_done=done)
    assert calls == []  # no mapping row yet: nothing happens
    db.write(lambda c: c.execute("INSERT INTO githubRepoMapping (id, repo, orchestrator, project, createdAt, "
                                 "updatedAt) VALUES ('rmp_1', 'o/r', 'dave', 'studio/x', 1, 1)"))
    b = new_task(db, title="Fix #42 again", project="studio/x")
    act(db, lifecycle.complete_task, task_id=b, note="n", caller=None, now=T0, max_minutes=480, on_done=done)
    c2 = new_task(db, title="no issue here", project="studio/x")
    act(db, lifecycle.complete_task, task_id=c2, note="n", caller=None, now=T0, max_minutes=480, on_done=done)
    assert calls == [([42], "o/r")]
