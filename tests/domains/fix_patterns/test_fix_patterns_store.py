"""Fix-pattern store on a DB file: cross-process auto-validation race, one transaction per write,
the embedding queue's triggers."""

from __future__ import annotations

import multiprocessing

import pytest
from support.fix_patterns_helpers import child_race

from vantage_peers.db.integrity import constraint_errors
from vantage_peers.domains.fix_patterns import store

# On both backends (the cross-process race too: its children open the file, or the PostgreSQL URL).
pytestmark = pytest.mark.backends


def new_pattern(db, **over):
    args = {"symptom": "s", "root_cause": "r", "source_project": "p", "created_by": "x", **over}
    return db.write(lambda c: store.create(c, **args))["patternId"]


@pytest.mark.slow
def test_two_processes_racing_worked_attempts_validate_exactly_once(db, settings):
    patterns = [new_pattern(db, symptom=f"race {i}") for i in range(12)]
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=child_race, args=(str(settings.db_path), w, patterns, barrier, results,
                                                  settings.database_url)) for w in ("w1", "w2")]
    for proc in procs:
        proc.start()
    won = dict(results.get(timeout=120) for _ in procs)
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    winners = [(pid, aid, writer) for writer, pairs in won.items() for pid, aid in pairs]
    assert sorted(pid for pid, _, _ in winners) == sorted(patterns)  # exactly one winner per pattern
    for pid, attempt_id, writer in winners:
        doc = db.read(lambda c, pid=pid: store.get(c, pattern_id=pid))
        assert doc["validatedAttemptId"] == attempt_id and doc["validatedFix"] == f"fix by {writer}"
        assert doc["validatedBy"] == writer and doc["attemptCount"] == 2 and len(doc["attempts"]) == 2
        assert all(a["worked"] for a in doc["attempts"])


def fail_attempt_count_updates(conn) -> None:
    if conn.backend == "postgres":
        conn.script("CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                    "RAISE EXCEPTION 'disk full' USING ERRCODE = 'integrity_constraint_violation'; END $$; "
                    "CREATE TRIGGER boom BEFORE UPDATE OF attemptCount ON fixPatterns "
                    "FOR EACH ROW EXECUTE FUNCTION boom()")
    else:
        conn.execute("CREATE TRIGGER boom BEFORE UPDATE OF attemptCount ON fixPatterns "
                     "BEGIN SELECT RAISE(ABORT, 'disk full'); END")


def test_add_attempt_is_one_transaction(db):
    pid = new_pattern(db)
    db.write(fail_attempt_count_updates)
    with pytest.raises(constraint_errors()):
        db.write(lambda c: store.add_attempt(c, pattern_id=pid, description="d", worked=True, why="w",
                                             created_by="x"))
    assert db.read(lambda c: c.scalar("SELECT count(*) FROM fixAttempts")) == 0
    assert db.read(lambda c: store.get(c, pattern_id=pid))["validated"] is False


def test_severity_is_checked_by_the_store_and_the_schema(db):
    from vantage_peers.core.errors import InvalidArgument

    with pytest.raises(InvalidArgument):
        new_pattern(db, severity="blocker")
    with pytest.raises(constraint_errors()):
        db.write(lambda c: c.execute(
            "INSERT INTO fixPatterns (id, symptom, rootCause, tags, stack, sourceProject, severity, createdBy, "
            "createdAt, updatedAt) VALUES ('fxp_x', 's', 'r', '[]', '[]', 'p', 'blocker', 'x', 1, 1)"))


def test_writes_queue_embedding_jobs_in_the_same_transaction(db):
    pid = new_pattern(db)
    jobs = "SELECT count(*) FROM fixPatternEmbeddingJobs"
    assert db.read(lambda c: c.scalar(jobs)) == 1
    assert db.read(lambda c: c.scalar("SELECT count(*) FROM embeddingJobs")) == 0  # memories' queue untouched
    db.write(lambda c: c.execute("DELETE FROM fixPatternEmbeddingJobs"))
    db.write(lambda c: store.add_attempt(c, pattern_id=pid, description="d", worked=True, why="w", created_by="x"))
    db.write(lambda c: store.link_issue(c, pattern_id=pid, issue_id="o/r#1"))
    assert db.read(lambda c: c.scalar(jobs)) == 0  # attempts and links do not change the embedded text
    db.write(lambda c: c.execute("UPDATE fixPatterns SET symptom = 'changed', updatedAt = 5 WHERE id = ?", (pid,)))
    assert db.read(lambda c: c.scalar(jobs)) == 1  # a text change re-queues it
    db.write(lambda c: c.execute("DELETE FROM fixPatterns WHERE id = ?", (pid,)))
    assert db.read(lambda c: c.scalar(jobs)) == 0  # cascades with the pattern
    assert db.read(lambda c: c.scalar("SELECT count(*) FROM fixAttempts")) == 0
    if db.backend == "sqlite":  # the FTS row goes with it (full text on PostgreSQL lives in search/)
        assert db.read(lambda c: c.scalar("SELECT count(*) FROM fixPatterns_fts WHERE fixPatterns_fts MATCH 'changed'")) == 0


def test_link_issue_cap(db, monkeypatch):
    from vantage_peers.core.errors import InvalidArgument

    pid = new_pattern(db)
    monkeypatch.setattr(store, "MAX_LINKED_ISSUES", 2)
    for issue in ("a#1", "a#2"):
        assert db.write(lambda c, i=issue: store.link_issue(c, pattern_id=pid, issue_id=i))["added"]
    assert db.write(lambda c: store.link_issue(c, pattern_id=pid, issue_id="a#2"))["added"] is False
    with pytest.raises(InvalidArgument, match="maximum"):
        db.write(lambda c: store.link_issue(c, pattern_id=pid, issue_id="a#3"))
