"""Worker for the quick-tool race across processes: one server app and one event loop per process,
calling checkout_task and send_message through the whole pipeline (imported by spawned processes)."""

from __future__ import annotations

from typing import Any

CONCURRENT = 4  # calls in flight per process and task


def race(path: str, proc: int, task_ids: list[str], barrier: Any, results: Any) -> None:
    import anyio
    from mcp import Client

    from vantage_peers.pipeline.settings import Settings
    from vantage_peers.server import create_app

    env = {"VP_DB_PATH": path, "VP_SCHEDULER": "off", "VP_EMBEDDINGS": "none", "VP_ORCHESTRATOR": f"p{proc}",
           "VP_BUSY_TIMEOUT_MS": "60000"}
    app = create_app(Settings.from_env(env, dotenv=False))

    async def main() -> list[tuple[str, str, Any]]:
        out: list[tuple[str, str, Any]] = []
        async with Client(app.mcp) as client:
            barrier.wait()  # every process starts together

            async def one(task_id: str, n: int) -> None:
                me = f"p{proc}-c{n}"
                got = await client.call_tool("checkout_task", {"taskId": task_id, "callerOrchestrator": me})
                sent = await client.call_tool("send_message", {"channel": "sink", "from": me,
                                                               "content": f"{task_id} {me}"})
                out.append((task_id, me, None if got.is_error else got.structured_content["claimed"]))
                out.append(("send", me, None if sent.is_error else sent.structured_content["messageId"]))

            for task_id in task_ids:
                async with anyio.create_task_group() as tg:
                    for n in range(CONCURRENT):
                        tg.start_soon(one, task_id, n)
        return out

    try:
        results.put(anyio.run(main))
    finally:
        app.db.close()
