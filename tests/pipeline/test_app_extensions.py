"""Per-App extension state (#18): two Apps in one process never see each other's hooks or state.

Before #18 these lived in module-level registries (`issue_links._linkers`, `fix_patterns.store.
_issue_side`, `scheduler.CONCURRENT`, `github.irp._apps`, `memory.services._services`) that
outlived an App and were shared by every App of the process.
"""

from __future__ import annotations

from conftest import make_settings, open_tools

from vantage_peers.db import open_database
from vantage_peers.domains.fix_patterns import store as fix_patterns
from vantage_peers.domains.memory.services import services
from vantage_peers.pipeline.app import App
from vantage_peers.server import create_app


class Wakes:
    """Stands in for a scheduler: records the jobs an App is asked to wake."""

    def __init__(self) -> None:
        self.jobs: list[str] = []

    def wake(self, job: str) -> None:
        self.jobs.append(job)


def _two_apps(tmp_path):
    return create_app(make_settings(tmp_path / "a.db")), create_app(make_settings(tmp_path / "b.db"))


def test_task_done_hooks_belong_to_one_app(tmp_path):
    a, b = _two_apps(tmp_path)
    try:
        # Each App has exactly its own GitHub hook: building a second App added none to the first.
        assert len(a.task_done_hooks) == 1 and len(b.task_done_hooks) == 1
        assert a.task_done_hooks[0] is not b.task_done_hooks[0]
        seen_a, seen_b = [], []
        a.on_task_done(lambda conn, task: seen_a.append(task["id"]))
        b.on_task_done(lambda conn, task: seen_b.append(task["id"]))
        with open_tools(a) as ta, open_tools(b) as tb:
            t1 = ta.call("create_task", title="a task", assignedTo="x", priority="low", createdBy="x")
            ta.call("complete_task", taskId=t1, completionNote="done", callerOrchestrator="x")
            t2 = tb.call("create_task", title="b task", assignedTo="y", priority="low", createdBy="y")
            tb.call("update_task", taskId=t2, status="done", completionNote="done", callerOrchestrator="y")
        assert seen_a == [t1] and seen_b == [t2]
    finally:
        a.db.close()
        b.db.close()


def test_issue_comment_wakes_only_the_completing_apps_outbox(tmp_path):
    a, b = _two_apps(tmp_path)
    a.scheduler, b.scheduler = Wakes(), Wakes()
    try:
        with open_tools(a) as ta:
            ta.call("add_repo_mapping", repo="org/repo", orchestrator="sigma", project="proj")
            tid = ta.call("create_task", title="[#12] T6 — reproduce", assignedTo="sigma", priority="low",
                          createdBy="sigma", project="proj")
            ta.call("complete_task", taskId=tid, completionNote="reproduced", callerOrchestrator="sigma")
        assert a.scheduler.jobs == ["github.outbox"]  # the T6 comment was queued: this App's sender wakes
        assert b.scheduler.jobs == []
        queued = a.db.read(lambda c: c.query("SELECT kind, issueNumber FROM githubOutbox"))
        assert [(r["kind"], r["issueNumber"]) for r in queued] == [("comment", 12)]
    finally:
        a.db.close()
        b.db.close()


def test_fix_pattern_issue_side_is_per_app(tmp_path):
    a, b = _two_apps(tmp_path)
    settings = make_settings(tmp_path / "bare.db")
    bare = App(settings, open_database(settings))
    try:
        assert a.extensions[fix_patterns.ISSUE_SIDE] is b.extensions[fix_patterns.ISSUE_SIDE]  # the same function,
        assert fix_patterns.ISSUE_SIDE not in bare.extensions  # but set by each App's GitHub domain only
        assert bare.task_done_hooks == [] and bare.concurrent_jobs == set()
    finally:
        for app in (a, b, bare):
            app.db.close()


def test_concurrent_jobs_and_memory_services_are_per_app(tmp_path):
    a, b = _two_apps(tmp_path)
    try:
        assert "recurring-tasks" in a.concurrent_jobs and "recurring-tasks" in b.concurrent_jobs
        a.allow_concurrent("only-a")
        assert "only-a" not in b.concurrent_jobs
        assert services(a) is services(a) and services(a) is not services(b)
    finally:
        a.db.close()
        b.db.close()
