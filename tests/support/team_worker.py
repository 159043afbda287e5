"""One worker of the team test (tests/domains/tasks/test_team_e2e.py): an agent loop over its own real stdio
`vantage-peers` server, as docs/coordination.md tells an agent to run it.

    python team_worker.py <out.jsonl> [--victim]

Identity and database come from the environment (VP_ORCHESTRATOR, VP_INSTANCE_ID, VP_DB_PATH or
VP_DATABASE_URL), handed to the server it starts. The loop:
  1. list_tasks claimable: true → checkout_task reserveFiles: true the first one it wins;
  2. work (a short sleep), complete_task, report DONE to the lead with `data` (idempotencyKey);
  3. nothing claimable: wait, subscribed to vp://tasks/<me>, for the notification that claimable work
     changed — or, with VP_TEAM_WAKE=wait, run `vantage-peers wait --for work` as a hook would (no
     polling of list_tasks either way: each list_tasks call follows a wake, and is logged).
A `--victim` worker stops after its first claim (holding the claim and its file reservations) and
writes `holding` to the log, for the parent to SIGKILL it. Every step is one JSON line in <out>.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

IDLE_WAKE_SECONDS = 20.0  # a safety net only: the subscription wakes the worker


def log(path: str, *record: Any) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps([time.time(), *record]) + "\n")


async def call(client: Client, tool: str, /, **args: Any) -> Any:
    result = await client.call_tool(tool, args)
    text = "\n".join(getattr(c, "text", "") for c in result.content)
    if result.is_error:
        raise RuntimeError(text)
    data = result.structured_content
    if data is None:
        return json.loads(text) if text else None
    return data["result"] if set(data) == {"result"} else data


async def main(out: str, victim: bool) -> None:
    who = os.environ["VP_ORCHESTRATOR"]
    server = os.environ.get("VP_TEAM_SERVER") or "vantage-peers"
    wake = anyio.Event()
    state = {"wake": wake}

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification) and message.method == "notifications/resources/updated":
            state["wake"].set()

    params = StdioServerParameters(command=server, args=[], env=dict(os.environ), cwd=os.getcwd())
    async with Client(params, mode="legacy", message_handler=on_message) as client:
        await client.subscribe_resource(f"vp://tasks/{who}")
        first = await call(client, "whoami")
        pools = [p for p in os.environ.get("VP_TEAM_POOLS", "").split(",") if p]
        await call(client, "update_profile", static={"role": "worker", "pools": pools})
        log(out, "start", who, os.getpid(), first)
        while True:
            state["wake"] = anyio.Event()  # armed before reading: a change after this read wakes us
            page = await call(client, "list_tasks", claimable=True, limit=50)
            log(out, "list", len(page["items"]))
            took = None
            for item in page["items"]:
                try:
                    got = await call(client, "checkout_task", taskId=item["_id"], reserveFiles=True,
                                     repo="team/repo")
                except RuntimeError as err:  # another worker won the race (or its files are held)
                    log(out, "refused", item["_id"], str(err)[:200])
                    continue
                if got["claimed"]:
                    took = (item, got)
                    break
            if took is None:
                if os.environ.get("VP_TEAM_WAKE") == "wait":  # a shell/hook agent: `vantage-peers wait`
                    proc = await anyio.run_process([server, "wait", "--for", "work", "--timeout",
                                                    str(IDLE_WAKE_SECONDS)], check=False)
                    log(out, "woke" if proc.returncode == 0 else "timeout")
                    continue
                with anyio.move_on_after(IDLE_WAKE_SECONDS) as idle:
                    await state["wake"].wait()
                log(out, "timeout" if idle.cancelled_caught else "woke")
                continue
            item, got = took
            log(out, "claimed", item["_id"], got["fencingToken"], [r["path"] for r in got.get("reservations", [])])
            if victim:
                log(out, "holding", item["_id"])
                while True:  # at work on it: its calls keep the claim alive until the parent SIGKILLs us
                    await call(client, "renew_task_claim", taskId=item["_id"])
                    await anyio.sleep(0.5)
            await anyio.sleep(0.05)  # the work
            await call(client, "complete_task", taskId=item["_id"], completionNote=f"done by {who}: tests pass")
            await call(client, "send_message", channel="lead", content=f"DONE {item['_id']}",
                       data={"event": "done", "taskId": item["_id"], "by": who},
                       idempotencyKey=f"done-{item['_id']}")
            log(out, "done", item["_id"])


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], "--victim" in sys.argv[2:])
