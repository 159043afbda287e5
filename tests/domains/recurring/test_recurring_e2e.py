"""End to end: the real console script, its scheduler thread on a 1 s tick, and a template due now."""

from __future__ import annotations

import os
import time

import anyio
import pytest
from mcp import Client, StdioServerParameters
from support.paths import console_script as _script

from vantage_peers.core.ids import now_ms
from vantage_peers.domains.recurring import store


@pytest.mark.slow
def test_console_script_fires_a_due_template_by_itself(tmp_path, db, db_path):
    path = db_path  # `db` (conftest, migrated) stays open beside the server process
    # Created 400 days ago on a yearly schedule: its nextRunAt (a 1 January) is past, the next one is
    # months away, so exactly one run is expected however slow the machine.
    template_id = db.write(lambda c: store.create(c, payload={
        "title": "Daily standup report", "assignedTo": "carol", "cronExpression": "0 0 1 1 *",
        "createdBy": "bob"}, now=now_ms() - 400 * 86_400_000))
    env = {**os.environ, "VP_DB_PATH": str(path), "VP_ORCHESTRATOR": "bob", "VP_SCHEDULER": "on",
           "VP_TICK_SECONDS": "1"}
    params = StdioServerParameters(command=_script(), args=[], env=env, cwd=str(tmp_path))

    async def main():
        async with Client(params) as client:
            deadline = time.monotonic() + 60
            while True:
                listed = (await client.call_tool("list_tasks", {"assignedTo": "carol", "detail": "full"})).structured_content
                if listed["items"]:
                    break
                assert time.monotonic() < deadline, "the due template never fired"
                await anyio.sleep(0.2)
            task = listed["items"][0]
            assert task["title"] == "Daily standup report" and task["status"] == "todo"
            assert task["recurringTaskId"] == template_id and task["createdBy"] == f"cron-{template_id}"
            got = (await client.call_tool("get_recurring_task", {"recurringTaskId": template_id}))
            definition = got.structured_content["result"]
            assert definition["runCount"] == 1 and definition["lastTaskId"] == task["_id"]
            assert definition["nextRunAt"] > definition["lastTriggered"]

    anyio.run(main)
    # One task per occurrence: as many tasks as runs, never more.
    runs = db.read(lambda c: c.scalar("SELECT count(*) FROM recurringRuns WHERE recurringTaskId = ?", (template_id,)))
    tasks = db.read(lambda c: c.scalar("SELECT count(*) FROM tasks WHERE recurringTaskId = ?", (template_id,)))
    assert runs == tasks == 1
