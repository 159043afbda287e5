"""Size of `tools/list` as a client receives it: the full surface, `core`, and each toolset.

    uv run python benchmarks/tools_list.py

Targets (issue 10): the full surface at most 0.7 KB per tool on average; `VP_TOOLSETS=core` at
most 25 KB. Bytes are the compact JSON of the ListToolsResult (what goes on the wire); tokens
are estimated at 4 bytes each.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import anyio
from mcp.types import ListToolsResult

from vantage_peers import toolsets
from vantage_peers.server import create_app
from vantage_peers.settings import Settings


def measure(chosen: tuple[str, ...], db: Path) -> tuple[int, int, str]:
    settings = Settings.from_env({}, dotenv=False).model_copy(
        update={"db_path": db, "scheduler": False, "toolsets": chosen})
    app = create_app(settings)
    try:
        tools = anyio.run(app.mcp.list_tools)
    finally:
        app.db.close()
    wire = ListToolsResult(tools=tools).model_dump_json(by_alias=True, exclude_none=True)
    return len(tools), len(wire.encode("utf-8")), wire


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        count, size, wire = measure(("all",), db)
        print(f"{'configuration':<28} {'tools':>5} {'bytes':>8} {'B/tool':>7} {'~tokens':>8}")
        print(f"{'VP_TOOLSETS=all':<28} {count:>5} {size:>8} {size / count:>7.0f} {size // 4:>8}")
        for name in toolsets.TOOLSETS:
            if name == toolsets.CORE:
                continue
            n, s, _ = measure(toolsets.parse_toolsets(name), db)
            if n:
                print(f"{'VP_TOOLSETS=core,' + name:<28} {n:>5} {s:>8} {s / n:>7.0f} {s // 4:>8}")
        n, s, _ = measure(("core",), db)
        print(f"{'VP_TOOLSETS=core':<28} {n:>5} {s:>8} {s / n:>7.0f} {s // 4:>8}")
        listed = json.loads(wire)["tools"]
        generated_titles = wire.count('Arguments"') + wire.count('Output"')
        nullable = sum(json.dumps(t["inputSchema"], separators=(",", ":")).count('{"type":"null"}') for t in listed)
        print(f"\ngenerated schema titles left: {generated_titles}; nullable anyOf left in input schemas: {nullable} "
              "(output schemas keep null where a tool really returns null)")
        def size_of(tool: dict) -> int:
            return len(json.dumps(tool, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))

        biggest = sorted(listed, key=size_of, reverse=True)[:5]
        print("largest tools: " + ", ".join(f"{t['name']} ({size_of(t)} B)" for t in biggest))
        print(f"\ntargets: all <= 700 B/tool -> {'met' if size / count <= 700 else 'MISSED'}; "
              f"core <= 25,000 B -> {'met' if s <= 25_000 else 'MISSED'}")


if __name__ == "__main__":
    main()
