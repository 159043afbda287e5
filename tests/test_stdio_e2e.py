"""End to end: spawn the real `vantage-peers` console script and talk MCP over stdio."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters


def _script() -> str:
    local = Path(sys.executable).parent / "vantage-peers"
    return str(local) if local.exists() else shutil.which("vantage-peers")  # type: ignore[return-value]


def test_console_script_serves_mcp_over_stdio(tmp_path):
    env = {**os.environ, "VP_DB_PATH": str(tmp_path / "e2e.db"), "VP_ORCHESTRATOR": "alice",
           "VP_SCHEDULER": "off"}
    params = StdioServerParameters(command=_script(), args=[], env=env, cwd=str(tmp_path))

    async def main():
        async with Client(params) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"send_message", "check_messages", "whoami", "list_peers"} <= names
            sent = await client.call_tool("send_message", {"channel": "bob", "content": "over stdio ✓"})
            assert not sent.is_error
            got = await client.call_tool("check_messages", {"recipient": "bob"})
            assert got.structured_content["result"][0]["content"] == "over stdio ✓"
            who = await client.call_tool("whoami", {})
            assert who.structured_content["orchestratorId"] == "alice"

    anyio.run(main)


def test_version_and_doctor(tmp_path):
    out = subprocess.run([_script(), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("vantage-peers ")
    env = {**os.environ, "VP_DB_PATH": str(tmp_path / "doc" / "d.db")}
    doc = subprocess.run([_script(), "doctor"], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert doc.returncode == 0, doc.stdout + doc.stderr
    for label in ("SQLite", "sqlite-vec", "journal mode: wal", "filesystem", "schema version", "tools registered"):
        assert label in doc.stdout
    # A path that cannot be written fails the check and the exit code.
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    bad = subprocess.run([_script(), "doctor"], capture_output=True, text=True, timeout=120,
                         env={**env, "VP_DB_PATH": str(blocker / "x.db")}, cwd=tmp_path)
    assert bad.returncode != 0 and "FAIL" in bad.stdout
