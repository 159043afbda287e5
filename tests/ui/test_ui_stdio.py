"""End to end over stdio: the real console script lists and reads ui:// resources and emits markers."""

from __future__ import annotations

import os

import anyio
import pytest
from mcp import Client, StdioServerParameters
from support.paths import console_script as _script
from support.ui_helpers import structure

from vantage_peers.ui import parse_tool_result


@pytest.mark.slow
def test_stdio_resources_and_markers(tmp_path):
    env = {**os.environ, "VP_DB_PATH": str(tmp_path / "e2e.db"), "VP_ORCHESTRATOR": "sigma",
           "VP_SCHEDULER": "off", "VP_EMIT_UI_MARKERS": "true"}
    params = StdioServerParameters(command=_script(), args=[], env=env, cwd=str(tmp_path))

    async def main():
        async with Client(params) as client:
            listed = (await client.list_resources()).resources
            # six fragments + the same six as MCP Apps views
            assert len(listed) == 12 and all(str(r.uri).startswith("ui://vp/v1/") for r in listed)
            assert sum(r.mime_type == "text/html;profile=mcp-app" for r in listed) == 6
            await client.call_tool("create_task", {"title": '"><img src=x onerror=alert(1)>', "assignedTo": "sigma",
                                                   "priority": "high"})
            page = (await client.read_resource("ui://vp/v1/tasks-table?assignedTo=sigma&lang=fr")).contents[0]
            assert page.mime_type == "text/html" and "1 tâche" in page.text
            assert "img" not in {t for t, _ in structure(page.text).tags}
            result = await client.call_tool("list_tasks", {"assignedTo": "sigma"})
            payload = parse_tool_result("\n".join(c.text for c in result.content))
            assert payload["kind"] == "tasks-table" and payload["items"][0]["title"].startswith('"><img')

    anyio.run(main)
