"""Deferred domains (pipeline/deferred.py, #34): a stdio server with toolsets off registers their
domains on first need; everything it answers, runs and hooks is what a full registration gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import make_settings, open_tools
from support.generated import check_generated

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
    check_generated(deferred.FILE, text, "tests/pipeline/test_deferred.py")


def test_core_defers_the_other_domains_and_answers_as_a_full_registration(pair):
    lazy, eager = pair
    assert lazy.deferred is not None and eager.deferred is None
    assert "create_bu" not in lazy.registered and "create_bu" in eager.registered
    with open_tools(lazy) as a, open_tools(eager) as b:
        assert a.listed == b.listed
        assert a.call("list_toolsets") == b.call("list_toolsets")
        # the first call registered the core domains; the others wait, and later calls register nothing
        assert "send_message" in lazy.registered and not lazy.deferred.needs(lazy)
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


@pytest.fixture
def every(tmp_path):
    """(lazy, eager) apps with every toolset on (the default) on two databases."""
    apps = _app(tmp_path / "lazy.db", True, "all"), _app(tmp_path / "eager.db", False, "all")
    yield apps
    for app in apps:
        app.db.close()


def test_all_toolsets_defer_every_domain_and_list_it_as_a_full_registration(every):
    lazy, eager = every
    assert lazy.deferred is not None and not lazy.registered.keys() - {"list_toolsets", "enable_toolset"}
    assert all(isinstance(t, deferred.DeferredTool) for t in lazy.tools if t.name not in lazy.registered)
    with open_tools(lazy) as a, open_tools(eager) as b:
        assert a.listed == b.listed and len(a.listed) == len(eager.tools)
        assert lazy.deferred is not None  # listing registered nothing
        made = a.call("store_memory", namespace="n", type="note", content="first call", createdBy="alice")
        assert lazy.deferred is None and made
        assert a.listed == b.listed
        assert a.call("list_toolsets") == b.call("list_toolsets")
    assert _registry(lazy) == _registry(eager)


def test_the_first_call_of_a_tool_that_no_domain_owns_registers_the_enabled_domains(every):
    lazy, eager = every
    with open_tools(lazy) as a, open_tools(eager) as b:
        assert a.call("list_toolsets") == b.call("list_toolsets")
        assert lazy.deferred is None
    assert _registry(lazy) == _registry(eager)


def test_a_listing_without_stored_schemas_registers_first(tmp_path, monkeypatch):
    """Another pydantic or SDK version than the stored files' (no schema): nothing is listed from them."""
    from vantage_peers.pipeline import prebuilt

    monkeypatch.setattr(prebuilt, "_stored", {})
    app = _app(tmp_path / "vp.db", True, "all")
    try:
        assert app.deferred is None
    finally:
        app.db.close()


@pytest.mark.parametrize("sets", ["core", "all"])
def test_a_lazy_start_imports_no_domain(tmp_path, sets):
    code = ("import sys; from vantage_peers.server import create_app; "
            "from vantage_peers.pipeline.settings import Settings; "
            "app = create_app(Settings.from_env(), lazy=True); "
            "print(sorted({m.split('.')[2] for m in sys.modules if m.startswith('vantage_peers.domains.') "
            "and m.endswith('.tools')}))")
    env = {**os.environ, "VP_DB_PATH": str(tmp_path / "vp.db"), "VP_SCHEDULER": "off", "VP_EMBEDDINGS": "none",
           "VP_TOOLSETS": sets}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().replace("'", '"')) == []


def test_a_placeholder_whose_set_came_on_registers_and_runs_the_real_tool(pair):
    lazy, _ = pair
    lazy.enabled_toolsets.add("records")  # on by another way than enable_toolset
    with open_tools(lazy) as tools:
        made = tools.call("create_bu", name="b", description="d", purpose="p", orchestratorId="alice",
                          createdBy="alice")
    assert made["name"] == "b" and "create_bu" in lazy.registered  # the enabled sets' domains, now registered


def test_a_lazy_server_announces_a_full_registrations_capabilities_and_serves_subscriptions(every):
    import warnings

    import anyio
    from mcp import Client

    lazy, eager = every

    async def capabilities(app, subscribe: bool):
        async with Client(app.mcp, mode="legacy") as client:
            if subscribe:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    await client.subscribe_resource("vp://inbox/bob")  # the stand-in registers, then subscribes
                    assert "vp://inbox/bob" in app.mcp.vp_resource_notifier.legacy
                    await client.unsubscribe_resource("vp://inbox/bob")
            return client.server_capabilities

    with open_tools(lazy) as a, open_tools(eager) as b:  # the 2026-07-28 era
        assert a.client.server_capabilities == b.client.server_capabilities
    assert lazy.deferred is not None
    legacy = anyio.run(capabilities, lazy, True)
    assert legacy == anyio.run(capabilities, eager, False) and legacy.resources.subscribe is True
    assert lazy.deferred is None
    assert "vp://inbox/bob" not in lazy.mcp.vp_resource_notifier.legacy


def test_listings_while_another_thread_registers_show_each_tool_once_in_order(every):
    import threading

    lazy, eager = every
    with open_tools(lazy) as a, open_tools(eager) as b:
        expected = list(b.listed)
        worker = threading.Thread(target=lazy.complete_registration)  # as the scheduler's first tick does
        worker.start()
        seen = []
        while worker.is_alive() or not seen:
            seen.append([t.name for t in a.portal.call(a.client.list_tools).tools])
        worker.join()
        seen.append([t.name for t in a.portal.call(a.client.list_tools).tools])
    assert lazy.deferred is None
    assert all(names == expected for names in seen), [n for n in seen if n != expected][:1]
