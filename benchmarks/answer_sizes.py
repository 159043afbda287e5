"""Answer size of every list and search tool for 5 realistic items: bytes an agent pays in context.

    uv run python benchmarks/answer_sizes.py            # default answers, then `detail: "full"`
    uv run python benchmarks/answer_sizes.py --json     # one JSON object per tool (for scripts)

Target (issue 34): at most 2 KB for 5 items by default (`detail: "compact"`), the full documents
with `detail: "full"`. A tool's answer is counted as a client receives it: the text content plus the
structured content (compact JSON), both of which MCP clients keep. The items are seeded through the
tools in an in-memory client, with text of the length agents write (a memory of a few sentences, a
task with a paragraph of description, a message of two or three lines). Not a test; sizes are
deterministic up to ids and timestamps.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from vantage_peers.pipeline.settings import Settings
from vantage_peers.server import create_app

TARGET = 2048
PARA = ("The deploy script reads DATABASE_URL from the environment and falls back to the local file when "
        "it is unset; on the staging host it was unset after the systemd unit moved to EnvironmentFile=, "
        "so the workers wrote to /var/lib/app/app.db while the web process read PostgreSQL. Fix: set the "
        "variable in /etc/app/env and restart both units; `app doctor` now reports the backend it uses. "
        "Check the migration log before the next release: schema 41 adds a column the old workers ignore.")
SHORT = ("Reviewed the retry loop in the webhook sender: backoff doubles up to 5 minutes, jitter 20 %. "
         "Two deliveries were lost when the queue table was vacuumed during a long transaction; see the "
         "postmortem in the team notes and the new test in tests/webhooks/test_retry.py.")


def seed_calls() -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    for i in range(5):
        calls += [
            ("store_memory", {"namespace": "team/app", "type": "decision", "content": f"Deploy note {i}: {PARA}"}),
            ("store_episode", {"namespace": "team/app", "context": f"release {i} of the webhook sender",
                               "goal": "no lost deliveries", "action": SHORT, "severity": "high",
                               "outcome": "two deliveries lost, replayed by hand",
                               "insight": "never vacuum the queue table inside a long transaction: " + SHORT}),
            ("send_message", {"channel": "team", "content": f"Deploy {i} done. {SHORT}"}),
            ("send_message", {"channel": "bench", "from": "peer", "content": f"Question {i} about the deploy. {SHORT}"}),
            ("create_task", {"title": f"Fix the deploy fallback {i}", "priority": "high", "assignedTo": "bench",
                             "description": PARA, "project": "app", "tags": ["deploy", "staging"]}),
            ("create_fix_pattern", {"symptom": f"workers write to the file while web reads PostgreSQL ({i})",
                                    "rootCause": PARA, "sourceProject": "app", "validatedFix": SHORT,
                                    "tags": ["deploy"], "files": ["deploy/app.service", "app/settings.py"]}),
            ("create_briefing_note", {"title": f"Deploy review {i}", "topic": "deploy", "participants": ["a", "b"],
                                      "content": PARA, "decisions": [SHORT]}),
            ("register_component", {"name": f"deploy-check-{i}", "type": "skill", "content": PARA, "project": "app"}),
            ("write_diary", {"date": f"2026-12-0{i + 1}", "content": PARA, "highlights": [SHORT], "blockers": []}),
            ("create_mission", {"name": f"Deploy hardening {i}", "project": "app", "status": "execute", "priority": "high",
                                "pilot": "bench", "agents": ["bench"], "description": PARA, "brief": SHORT}),
        ]
    return calls


# Each list or search tool with arguments that find the 5 seeded items.
CASES: dict[str, dict[str, Any]] = {
    "recall": {"query": "deploy database fallback", "namespace": "team/app"},
    "text_search": {"query": "deploy", "namespace": "team/app"},
    "hybrid_search": {"query": "deploy database fallback", "namespace": "team/app"},
    "list_memories": {"namespace": "team/app"},
    "list_episodes": {"namespace": "team/app"},
    "search_episodes_by_keyword": {"query": "webhook", "namespace": "team/app"},
    "search_episodes_by_semantic": {"query": "webhook deliveries", "namespace": "team/app"},
    "list_messages": {"channel": "team"},
    "check_messages": {},
    "search_messages_by_keyword": {"query": "deploy"},
    "list_tasks": {"project": "app"},
    "search_tasks_by_keyword": {"query": "deploy"},
    "list_fix_patterns": {"project": "app"},
    "search_fix_patterns": {"query": "workers PostgreSQL"},
    "list_briefing_notes": {},
    "search_briefing_notes_by_keyword": {"query": "deploy"},
    "list_components": {},
    "search_components": {"query": "deploy"},
    "list_diaries": {},
    "list_missions": {"project": "app"},
}


def size(result: Any) -> tuple[int, int, int]:
    """(items, text bytes, structured bytes) of a CallToolResult."""
    text = sum(len(block.text.encode()) for block in result.content if getattr(block, "text", None) is not None)
    data = result.structured_content
    structured = len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()) if data is not None else 0
    value = data.get("result", data) if isinstance(data, dict) else data
    items = value.get("items", value.get("hits")) if isinstance(value, dict) else value
    return (len(items) if isinstance(items, list) else -1), text, structured


async def measure(detail: bool) -> dict[str, dict[str, Any]]:
    path = Path(tempfile.mkdtemp()) / "sizes.db"
    env = {"VP_DB_PATH": str(path), "VP_SCHEDULER": "off", "VP_EMBEDDINGS": "none", "VP_ORCHESTRATOR": "bench"}
    app = create_app(Settings.from_env(env, dotenv=False))
    out: dict[str, dict[str, Any]] = {}
    try:
        async with Client(app.mcp) as client:
            for tool, args in seed_calls():
                made = await client.call_tool(tool, args)
                assert not made.is_error, (tool, made.content)
            for tool, args in CASES.items():
                base = {**args, "limit": 5}
                default = await client.call_tool(tool, base)
                row: dict[str, Any] = {"default": size(default), "error": default.is_error}
                if detail:
                    full = await client.call_tool(tool, {**base, "detail": "full"})
                    row["full"] = None if full.is_error else size(full)
                out[tool] = row
    finally:
        app.db.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-detail", action="store_true", help="servers without the `detail` argument")
    args = parser.parse_args()
    rows = anyio.run(measure, not args.no_detail)
    if args.json:
        print(json.dumps(rows))
        return
    print(f"{'tool':<34} {'items':>5} {'default bytes':>14} {'full bytes':>11}  ≤ {TARGET} B")
    for tool, row in rows.items():
        n, text, structured = row["default"]
        full = row.get("full")
        shown = f"{sum(full[1:]):>11}" if full else f"{'—':>11}"
        flag = "error" if row["error"] else ("ok" if text + structured <= TARGET else "OVER")
        print(f"{tool:<34} {n:>5} {text + structured:>14} {shown}  {flag}")


if __name__ == "__main__":
    main()
