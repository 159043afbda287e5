"""The HTTP load the `serve` benchmarks share (backends.py, http_transport.py).

`run` is a load process: `clients` MCP clients posting `tools/call` in a loop until `start_at +
seconds`, alternating a `send_message` with the scenario's second call, client n on
`urls[(first + n) % len(urls)]`; it puts `{ok, sent, errors, times}` on `out`. The servers are
`support.http_helpers.Serve` processes (their master token is `MASTER`).
"""

from __future__ import annotations

import time
from typing import Any

from support.http_helpers import MASTER


def _inbox(n: int, i: int) -> dict[str, Any]:
    """Each client its own channel: send to it, then read it."""
    if i % 2 == 0:
        return {"name": "send_message", "arguments": {"channel": f"c{n}", "content": f"{n}-{i}", "from": "x"}}
    return {"name": "check_messages", "arguments": {"recipient": f"c{n}", "limit": 20}}


def _recall(n: int, i: int) -> dict[str, Any]:
    """Messages to one channel between recalls."""
    if i % 2 == 0:
        return {"name": "send_message", "arguments": {"channel": "bob", "content": f"{n}-{i}", "from": "x"}}
    return {"name": "recall", "arguments": {"query": "latency", "namespace": "project/bench"}}


SCENARIOS = {"inbox": _inbox, "recall": _recall}


def run(urls: list[str], first: int, clients: int, seconds: float, start_at: float, out: Any,
        scenario: str) -> None:
    import anyio
    import httpx2

    call_for = SCENARIOS[scenario]
    counts: dict[str, Any] = {"ok": 0, "sent": 0, "errors": 0, "times": []}

    async def one(n: int) -> None:
        headers = {"Authorization": f"Bearer {MASTER}", "Accept": "application/json, text/event-stream",
                   "Content-Type": "application/json"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            i = 0
            while time.time() < start_at + seconds:
                call = call_for(n, i)
                t = time.perf_counter()
                url = urls[(first + n) % len(urls)]  # the clients spread over the servers
                r = await http.post(url, json={"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": call})
                counts["times"].append(time.perf_counter() - t)
                if r.status_code == 200 and '"isError":false' in r.text.replace(" ", ""):
                    counts["ok"] += 1
                    counts["sent"] += i % 2 == 0
                else:
                    counts["errors"] += 1
                i += 1

    async def main() -> None:
        await anyio.sleep(max(0.0, start_at - time.time()))
        async with anyio.create_task_group() as tg:
            for n in range(clients):
                tg.start_soon(one, n)

    anyio.run(main)
    out.put(counts)
