"""`vantage-peers status` reads the file without building the app (#34): the jobs and corpora every
process registers come from status_registry.json, which must match a full registration."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support.generated import check_generated

from vantage_peers import status

pytestmark = pytest.mark.fast


def test_the_registry_file_matches_a_full_registration(app):
    """Fails when a job or corpus was added, renamed or rescheduled without regenerating the file."""
    text = status.render_registry(status.generate(app))
    check_generated(status.REGISTRY, text, "tests/entry/test_status_registry.py")
    assert json.loads(text)["jobs"][-1][0] == "idempotency-keys" and len(json.loads(text)["jobs"]) == len(app.jobs)


def test_status_from_the_registry_reads_what_the_full_app_reads(app, tools, settings):
    """Same peers, unread, tasks, jobs (with run state), leases and embedding backlog, both ways."""
    tools.call("send_message", channel="bob", content="hi", **{"from": "alice"})
    tools.call("create_task", title="t", priority="low", createdBy="alice", assignedTo="bob")
    tools.call("store_memory", namespace="n", type="note", content="waits for a vector", createdBy="alice")
    full = status.collect(app)
    light_app = status.reader(settings)
    try:
        light = status.collect(light_app)
    finally:
        light_app.db.close()
    assert not hasattr(light_app, "mcp") and not hasattr(light_app, "tools")
    for data in (full, light):
        data.pop("now")
    assert light == full
    assert light["unread"] and light["openTasks"] and light["embeddingBacklog"]["pending"] >= 1
    assert [j["name"] for j in light["jobs"]] == [name for name, _ in app.jobs]


def test_status_imports_neither_the_sdk_nor_a_tool_module(db_path, tmp_path):
    """What the console script does for `status`, in a fresh interpreter: no `mcp`, no domain tools (the
    SDK's exceptions module alone, which core/errors.py loads by path without the package)."""
    code = ("import sys; from vantage_peers.cli import main; rc = main(['status']); "
            "bad = sorted(m for m in sys.modules if (m == 'mcp' or m.startswith('mcp.') or m.endswith('.tools')) "
            "and m != 'mcp.server.mcpserver.exceptions'); "
            "print('LOADED', bad, file=sys.stderr); sys.exit(rc)")
    env = {**os.environ, "VP_DB_PATH": str(db_path)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "scheduler jobs" in proc.stdout and "idempotency-keys" in proc.stdout
    assert "LOADED []" in proc.stderr, proc.stderr
