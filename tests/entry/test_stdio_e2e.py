"""End to end: spawn the real `vantage-peers` console script and talk MCP over stdio."""

from __future__ import annotations

import os
import subprocess

import anyio
import pytest
from mcp import Client, StdioServerParameters
from support.paths import console_script as _script


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


@pytest.mark.slow
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
    assert bad.returncode == 2 and "VP_DB_PATH" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_stdio_server_embeds_in_the_background_and_recalls_by_meaning(tmp_path):
    """The product path: console script + scheduler thread + OpenAI-compatible endpoint on loopback."""
    import time

    from support.memory_helpers import API_KEY, MODEL, FakeEmbeddingServer

    fake = FakeEmbeddingServer()
    env = {**os.environ, "VP_DB_PATH": str(tmp_path / "bg.db"), "VP_ORCHESTRATOR": "alice",
           "OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": fake.url, "VP_EMBEDDING_MODEL": MODEL,
           "VP_TICK_SECONDS": "3600"}  # only the wake-up after a write can embed within this test
    params = StdioServerParameters(command=_script(), args=[], env=env, cwd=str(tmp_path))

    async def main():
        async with Client(params) as client:
            stored = await client.call_tool("store_memory", {
                "namespace": "project/cars", "type": "note", "content": "The automobile needs new tyres"})
            assert not stored.is_error
            target = stored.structured_content["memoryId"]
            deadline = time.monotonic() + 30
            while True:
                found = (await client.call_tool("recall", {"query": "car", "namespace": "project/cars"}))
                data = found.structured_content
                if data["mode"] != "keyword" and data["items"]:
                    break
                assert time.monotonic() < deadline, f"never embedded: {data}"
                await anyio.sleep(0.1)
            assert data["items"][0]["_id"] == target and "vector" in data["items"][0]["matchedBy"]

    try:
        anyio.run(main)
    finally:
        fake.stop()
    assert fake.calls >= 2  # the document, then the query
