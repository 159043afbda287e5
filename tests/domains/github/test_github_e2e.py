"""End to end across processes: two HTTP processes serving the webhook and a stdio MCP server, all
with their schedulers on, one SQLite file (or one PostgreSQL database, standing for several hosts),
a flaky fake GitHub on loopback.

issues.opened → issue row + mission + exactly one "Investigating" comment; completing the T6, T8 and
T11 tasks over stdio → exactly three more; every comment first fails twice with a 500.
(The HTTP processes are the real `vantage-peers serve`, which mounts the webhook from `app.routes`.)
"""

from __future__ import annotations

import os

import anyio
import pytest
from conftest import make_settings
from mcp import Client, StdioServerParameters
from support.github_helpers import SECRET, TOKEN, FakeGitHub, deliver, issues_event, wait_for
from support.http_helpers import Serve
from support.paths import console_script as _script

from vantage_peers.domains.github import mappings
from vantage_peers.server import create_app

REPO = "myreeldream-ai/MyShortReel-beta"



@pytest.mark.backends
@pytest.mark.slow
def test_webhook_to_comments_exactly_once_across_processes(tmp_path, database_url):
    github = FakeGitHub()
    github.fail_new = 2
    db_path = tmp_path / "shared.db"
    setup = create_app(make_settings(db_path, database_url=database_url))
    setup.db.write(lambda c: mappings.add(c, repo=REPO, orchestrator="dave", project="myreeldream", created_by=None))
    # The 14-step v2 template has T6, T8 and T11 (spec §8: its numbering drives the comments).
    setup.db.write(lambda c: c.execute("UPDATE missionTemplates SET isDefault = CASE WHEN name = 'issue-resolution-v2' THEN 1 ELSE 0 END"))
    setup.db.close()
    env = {**os.environ, "VP_DB_PATH": str(db_path), "GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": github.url,
           "GITHUB_WEBHOOK_SECRET": SECRET, "VP_SCHEDULER": "on", "VP_TICK_SECONDS": "0.3",
           "VP_GITHUB_RETRY_SECONDS": "0.1", "VP_EMBEDDINGS": "none",
           **({"VP_DATABASE_URL": database_url} if database_url else {})}
    env.pop("VP_ORCHESTRATOR", None)
    procs: list[Serve] = []
    try:
        for _ in range(2):
            procs.append(Serve(db_path, env=env))
        urls = [p.base for p in procs]
        params = StdioServerParameters(command=_script(), args=[], env=env, cwd=str(tmp_path))

        async def main():
            async with Client(params) as client:
                async def call(name, **args):
                    result = await client.call_tool(name, args)
                    assert not result.is_error, result.content
                    data = result.structured_content
                    return data["result"] if set(data or {}) == {"result"} else data

                def opened():
                    delivery = "8a1c4b2e-0000-4000-8000-000000000282"
                    status, out = deliver(urls[0], "issues", issues_event("opened", REPO, 282), delivery=delivery)
                    assert status == 200 and out["commentQueued"] and len(out["taskIds"]) == 14
                    status, out = deliver(urls[1], "issues", issues_event("opened", REPO, 282), delivery=delivery)
                    assert status == 200 and out["duplicate"]
                    wait_for(lambda: len(github.all_comments()) >= 1, 60, what="Investigating comment")

                await anyio.to_thread.run_sync(opened)
                issue = await call("get_issue", repo=REPO, issueNumber=282)
                tasks = (await call("list_tasks_by_mission", missionId=issue["missionId"], limit=50))["items"]
                by_step = {t["title"].split(" — ")[0]: t for t in tasks}
                assert len(by_step) == 14
                for step in ("T6", "T8", "T11"):
                    await call("complete_task", taskId=by_step[f"[#282] {step}"]["_id"],
                               completionNote=f"{step} done: tests/test_credits.py 12 tests, commit 9f3c2ab1")
                await anyio.to_thread.run_sync(
                    lambda: wait_for(lambda: len(github.all_comments()) >= 4, 60, what="T6/T8/T11 comments"))
                await anyio.sleep(2.0)  # several more ticks of three schedulers: nothing else may be sent
                issue = await call("get_issue", repo=REPO, issueNumber=282)
                assert issue["status"] == "fixed" and len(issue["linkedTaskIds"]) == 3

        anyio.run(main)
        first_lines = [c["body"].splitlines()[0] for c in github.all_comments()]
        assert first_lines == ["Investigating - assigned to dave",
                               "Bug reproduced in test suite. Root cause identified.",
                               "Fix ready. All tests pass including new regression test.",
                               "Fixed and deployed to production. Regression test added."]
        assert sum(1 for m, _ in github.requests if m == "POST") == 12  # two 500s, then one success each
        check = create_app(make_settings(db_path, database_url=database_url))
        rows = check.db.read(lambda c: c.query("SELECT status, attempts FROM githubOutbox"))
        check.db.close()
        assert [r["status"] for r in rows] == ["sent"] * 4 and all(r["attempts"] == 3 for r in rows)
    finally:
        for p in procs:
            p.terminate()
        codes = [p.stop() for p in procs]
        github.stop()
    for p in procs:
        log = p.log.read_text()
        assert "Traceback" not in log, log
    assert codes == [0, 0]
