"""Deferred domains (pipeline/deferred.py, #34): a stdio server with toolsets off registers their
domains on first need; everything it answers, runs and hooks is what a full registration gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import make_settings, open_tools

from vantage_peers.pipeline import deferred, toolsets
from vantage_peers.pipeline.scheduler import Scheduler
from vantage_peers.server import create_app


def _app(db_path, lazy: bool, sets: str = "core"):
    return create_app(make_settings(db_path, toolsets=toolsets.parse_toolsets(sets)), lazy=lazy)


@pytest.fixture
def pair(tmp_path):
    """(lazy, eager) apps with VP_TOOLSETS=core on two databases."""
    apps = _app(tmp_path / "lazy.db", True), _app(tmp_path / "eager.db", False)
    yield apps
    for app in apps:
        app.db.close()


def _registry(app) -> dict:
    return {"tools": [t.name for t in app.tools], "toolsets": dict(app.toolset_of),
            "jobs": [name for name, _ in app.jobs], "schedules": app.job_schedules,
            "corpora": [c.name for c in app.corpora], "records": sorted(app.records),
            "routes": len(app.routes), "task_done": len(app.task_done_hooks),
            "concurrent": sorted(app.concurrent_jobs), "extensions": sorted(app.extensions),
            "server_hooks": len(app.server_hooks)}


def test_the_file_holds_every_domains_tools(app):
    """Fails when a tool was added, renamed or moved without regenerating the file."""
    text = deferred.render(deferred.generate(app))
    if os.environ.get("VP_UPDATE_SNAPSHOTS") == "1":
        deferred.FILE.write_text(text, encoding="utf-8")
    assert deferred.FILE.read_text(encoding="utf-8") == text, (
        f"{deferred.FILE.name} is stale: VP_UPDATE_SNAPSHOTS=1 uv run pytest -n 0 tests/pipeline/test_deferred.py")


def test_core_defers_the_other_domains_and_answers_as_a_full_registration(pair):
    lazy, eager = pair
    assert lazy.deferred is not None and eager.deferred is None
    assert "create_bu" not in lazy.registered and "create_bu" in eager.registered
    with open_tools(lazy) as a, open_tools(eager) as b:
        assert a.listed == b.listed
        assert a.call("list_toolsets") == b.call("list_toolsets")
        args = {"name": "b", "description": "d", "purpose": "p", "orchestratorId": "alice"}
        assert a.error("create_bu", **args) == b.error("create_bu", **args)
        assert "TOOLSET_DISABLED" in a.error("create_bu", **args)
        assert lazy.deferred is not None  # refusing a call of a set that is off loads nothing
        assert a.call("enable_toolset", name="records") == b.call("enable_toolset", name="records")
        assert lazy.deferred is None
        assert a.listed == b.listed
        assert a.call("create_bu", createdBy="alice", **args)["name"] == "b"
    assert _registry(lazy) == _registry(eager)


def test_the_scheduler_runs_the_jobs_of_deferred_domains(pair):
    lazy, eager = pair
    assert {n for n, _ in lazy.jobs} < {n for n, _ in eager.jobs}
    Scheduler(lazy).run_once(only=set())
    assert _registry(lazy) == _registry(eager)


def test_a_task_completing_runs_the_hooks_of_deferred_domains(pair):
    lazy, eager = pair
    assert len(lazy.task_done_hooks) < len(eager.task_done_hooks)
    with open_tools(lazy) as tools:
        task = tools.call("create_task", title="t", assignedTo="alice", priority="low", createdBy="alice")
        assert lazy.deferred is not None
        tools.call("complete_task", taskId=task, completionNote="done", callerOrchestrator="alice")
    assert lazy.deferred is None
    assert _registry(lazy) == _registry(eager)


def test_all_toolsets_defer_nothing(tmp_path):
    app = _app(tmp_path / "vp.db", True, "all")
    try:
        assert app.deferred is None and not any(isinstance(t, deferred.DeferredTool) for t in app.tools)
    finally:
        app.db.close()


def test_a_lazy_core_start_imports_no_deferred_domain(tmp_path):
    code = ("import sys; from vantage_peers.server import create_app; "
            "from vantage_peers.pipeline.settings import Settings; "
            "app = create_app(Settings.from_env(), lazy=True); "
            "print(sorted({m.split('.')[2] for m in sys.modules if m.startswith('vantage_peers.domains.') "
            "and m.endswith('.tools')}))")
    env = {**os.environ, "VP_DB_PATH": str(tmp_path / "vp.db"), "VP_SCHEDULER": "off", "VP_EMBEDDINGS": "none",
           "VP_TOOLSETS": "core"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = set(json.loads(out.stdout.strip().replace("'", '"')))
    core = {d for d, ts in toolsets.DOMAIN_TOOLSETS.items() if ts == "core"}
    assert loaded == core


def test_a_placeholder_whose_set_came_on_registers_and_runs_the_real_tool(pair):
    lazy, _ = pair
    lazy.enabled_toolsets.add("records")  # on by another way than enable_toolset
    with open_tools(lazy) as tools:
        made = tools.call("create_bu", name="b", description="d", purpose="p", orchestratorId="alice",
                          createdBy="alice")
    assert made["name"] == "b" and lazy.deferred is None
