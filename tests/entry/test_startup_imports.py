"""Start-up paths (#34): the stdio server imports nothing of HTTP or the scheduler beyond what the
SDK itself imports and answers tools/list from the prebuilt schemas; `status` reads the registry
without composing an MCP server."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys

import pytest
from support.paths import REPO

# A server over stdio gets these lines, answers, and ends at end of input; the script then writes the
# modules the process imported to the file named by sys.argv_out.
REQUESTS = "".join(json.dumps(m) + "\n" for m in (
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
))
OURS = """
import json, sys
from vantage_peers.cli import main
sys.argv = sys.argv[:1]
main([])
from vantage_peers.pipeline import prebuilt
json.dump({"modules": sorted(sys.modules), "prepared": prebuilt.COUNTS}, open(sys.argv_out, "w"))
"""
# The benchmark's one-tool floor server, then the same dump of its modules.
FLOOR = runpy.run_path(str(REPO / "benchmarks" / "startup.py"))["MINIMAL"] + \
    'json.dump({"modules": sorted(sys.modules)}, open(sys.argv_out, "w"))\n'
# Packages only `serve` (HTTP, OAuth) and the scheduler (cron) use.
HTTP_AND_SCHEDULER = ("uvicorn", "starlette", "sse_starlette", "cryptography", "croniter", "dateutil", "jwt",
                      "multipart", "python_multipart", "httpx", "httpx2", "h11")


def _run(script: str, out, tmp_path) -> dict:
    env = {**os.environ, "VP_DB_PATH": str(tmp_path / "vp.db"), "VP_SCHEDULER": "off", "VP_EMBEDDINGS": "none"}
    code = f"import json, sys; sys.argv_out = {str(out)!r}\n" + script
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    try:
        proc.stdin.write(REQUESTS)
        proc.stdin.flush()
        replies = [json.loads(proc.stdout.readline()) for _ in range(2)]  # then end of input: it exits
        proc.stdin.close()
        assert proc.wait(timeout=300) == 0, proc.stderr.read()[-2000:]
    finally:
        proc.kill()
        proc.wait()
    assert [r.get("id") for r in replies] == [1, 2], replies
    return {**json.loads(out.read_text()), "tools": len(replies[1]["result"]["tools"])}


@pytest.mark.slow
def test_stdio_start_imports_no_http_or_scheduler_module_beyond_the_sdk(tmp_path):
    ours = _run(OURS, tmp_path / "ours.json", tmp_path)
    floor = _run(FLOOR, tmp_path / "floor.json", tmp_path)
    extra = set(ours["modules"]) - set(floor["modules"])
    offending = sorted(m for m in extra if m.split(".")[0] in HTTP_AND_SCHEDULER)
    assert not offending, f"imported on the stdio path (keep them lazy, where HTTP or the scheduler use them): {offending}"
    assert not any(m.startswith(("vantage_peers.http", "vantage_peers.dashboard")) for m in ours["modules"])
    # every listed tool came from the stored files, none was built and no domain imported at start
    assert ours["prepared"]["built"] == 0
    assert not [m for m in ours["modules"] if m.startswith("vantage_peers.domains.") and m.endswith(".tools")]
    assert ours["tools"] > 100
    assert (REPO / "vantage_peers" / "pipeline" / "tool_schemas.json").exists()


def test_status_reads_the_registry_a_server_has_without_composing_one(tmp_path):
    from conftest import make_settings

    from vantage_peers.server import create_app

    served = create_app(make_settings(tmp_path / "served.db"))
    bare = create_app(make_settings(tmp_path / "bare.db"), serve=False)
    try:
        assert served.mcp is not None and bare.mcp is None
        assert [name for name, _ in bare.jobs] == [name for name, _ in served.jobs]
        assert "idempotency-keys" in bare.job_schedules
        assert bare.job_schedules == served.job_schedules
        assert [c.name for c in bare.corpora] == [c.name for c in served.corpora]
    finally:
        served.db.close()
        bare.db.close()


GC_STATE = """
import gc, json, sys
from vantage_peers import cli
seen = {}
real = cli.started
def started():
    seen["before"] = gc.isenabled()
    real()
cli.started = started
sys.argv = sys.argv[:1]
cli.main()  # the console script's own call (argv None): serves until end of input
json.dump({"modules": [], "before": seen.get("before"), "after": gc.isenabled(), "frozen": gc.get_freeze_count()},
          open(sys.argv_out, "w"))
"""


@pytest.mark.slow
def test_the_server_builds_without_cyclic_collection_and_serves_with_it(tmp_path):
    # #34: collections during the imports and the build are ~10 % of the start; a server left without
    # them for its whole life would grow on every reference cycle, so it must be on once serving.
    state = _run(GC_STATE, tmp_path / "gc.json", tmp_path)
    assert state["before"] is False
    assert state["after"] is True and state["frozen"] > 0


def test_the_git_guard_imports_neither_the_sdk_nor_the_database_layer():
    """`vantage-peers guard` runs in every `git commit` of a guarded repo: its module and the repository
    lookup it shares with the tools stay light (importing the SDK cost ~0.5 s a commit)."""
    code = ("import sys; import vantage_peers.domains.leases.guard; "
            "print(' '.join(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'vantage_peers.db'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == []
