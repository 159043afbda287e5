"""Size of `tools/list` as a client receives it — bytes and real tokens — plus the server instructions.

    uv run python benchmarks/tools_list.py

Targets (issue 24): the full surface <= 50 KB, `VP_TOOLSETS=core` <= 20 KB and <= 40 tools (Cursor's
cap), the server instructions (the one text deferred-tool clients always load) <= 2 KB. Bytes are the
compact JSON of the ListToolsResult (what goes on the wire). Tokens are counted offline with
`bpe-openai` (a dev dependency: the Rust BPE with OpenAI's o200k_base / cl100k_base ranks built in;
`tiktoken` downloads its encodings at run time, so it cannot count offline). Anthropic's tokenizer
is not published; o200k_base is the usual proxy.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import anyio
from mcp.types import ListToolsResult

from vantage_peers.pipeline import toolsets
from vantage_peers.pipeline.settings import Settings
from vantage_peers.server import INSTRUCTIONS, create_app
from vantage_peers.ui.apps import with_ui_meta

try:
    import bpe_openai

    ENCODINGS = {name: bpe_openai.get_encoding(name) for name in ("o200k_base", "cl100k_base")}
except ImportError:  # run without the dev group: bytes only
    ENCODINGS = {}

ALL_MAX, CORE_MAX, CORE_TOOLS_MAX, INSTRUCTIONS_MAX = 50_000, 20_000, 40, 2_048


def tokens(text: str, name: str = "o200k_base") -> int | None:
    enc = ENCODINGS.get(name)
    return len(enc.encode(text)) if enc is not None else None


def measure(chosen: tuple[str, ...], db: Path, apps_host: bool = False) -> tuple[int, int, str]:
    settings = Settings.from_env({}, dotenv=False).model_copy(
        update={"db_path": db, "scheduler": False, "toolsets": chosen})
    app = create_app(settings)
    try:
        tools = anyio.run(app.mcp.list_tools)
    finally:
        app.db.close()
    if apps_host:  # what a client that negotiated MCP Apps receives (_meta.ui on six tools)
        tools = with_ui_meta(tools)
    wire = ListToolsResult(tools=tools).model_dump_json(by_alias=True, exclude_none=True)
    return len(tools), len(wire.encode("utf-8")), wire


def row(label: str, n: int, size: int, wire: str) -> str:
    o200k, cl100k = tokens(wire), tokens(wire, "cl100k_base")
    return (f"{label:<28} {n:>5} {size:>8} {size / max(n, 1):>7.0f} "
            f"{o200k if o200k is not None else '-':>8} {cl100k if cl100k is not None else '-':>8}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        count, size, wire = measure(("all",), db)
        print(f"{'configuration':<28} {'tools':>5} {'bytes':>8} {'B/tool':>7} {'o200k':>8} {'cl100k':>8}")
        print(row("VP_TOOLSETS=all", count, size, wire))
        for name in toolsets.TOOLSETS:
            if name == toolsets.CORE:
                continue
            n, s, w = measure(toolsets.parse_toolsets(name), db)
            if n:
                print(row("VP_TOOLSETS=core," + name, n, s, w))
        core_n, core_s, core_w = measure(("core",), db)
        print(row("VP_TOOLSETS=core", core_n, core_s, core_w))
        print(row("all, MCP Apps host", *measure(("all",), db, apps_host=True)))
        print(row("core, MCP Apps host", *measure(("core",), db, apps_host=True)))
        instr = len(INSTRUCTIONS.encode("utf-8"))
        print(row("server instructions", 1, instr, INSTRUCTIONS))
        listed = json.loads(wire)["tools"]
        generated_titles = wire.count('Arguments"') + wire.count('Output"')
        nullable = sum(json.dumps(t["inputSchema"], separators=(",", ":")).count('{"type":"null"}') for t in listed)
        print(f"\ngenerated schema titles left: {generated_titles}; nullable anyOf left in input schemas: {nullable} "
              "(output schemas keep null where a tool really returns null)")

        def size_of(tool: dict) -> int:
            return len(json.dumps(tool, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))

        biggest = sorted(listed, key=size_of, reverse=True)[:5]
        print("largest tools: " + ", ".join(f"{t['name']} ({size_of(t)} B)" for t in biggest))
        def part(key: str) -> int:
            return sum(len(json.dumps(t[key], separators=(",", ":"), ensure_ascii=False).encode())
                       for t in listed if key in t)

        descriptions = sum(len((t.get("description") or "").encode()) for t in listed)
        schemas, outputs, hints = part("inputSchema"), part("outputSchema"), part("annotations")
        print(f"where the bytes are: descriptions {descriptions} B, input schemas {schemas} B, "
              f"output schemas {outputs} B, annotations {hints} B, names and keys "
              f"{size - descriptions - schemas - outputs - hints} B")

        def without_descriptions(listing: str) -> int:
            """The list with every description emptied: the part no rewording can shrink."""
            bare = [{**t, "description": ""} for t in json.loads(listing)["tools"]]
            return len(json.dumps({"tools": bare}, separators=(",", ":"), ensure_ascii=False).encode())

        print(f"with every description empty: {without_descriptions(wire)} B (all), "
              f"{without_descriptions(core_w)} B (core)")

        def verdict(ok: bool) -> str:
            return "met" if ok else "MISSED"

        print(f"\ntargets: all <= {ALL_MAX:,} B -> {verdict(size <= ALL_MAX)} ({size / ALL_MAX:.2f}x); "
              f"core <= {CORE_MAX:,} B -> {verdict(core_s <= CORE_MAX)} ({core_s / CORE_MAX:.2f}x); "
              f"core <= {CORE_TOOLS_MAX} tools -> {verdict(core_n <= CORE_TOOLS_MAX)} ({core_n}); "
              f"instructions <= {INSTRUCTIONS_MAX:,} B -> {verdict(instr <= INSTRUCTIONS_MAX)} ({instr} B)")
        if not ENCODINGS:
            print("(token columns need the dev group: uv sync)")


if __name__ == "__main__":
    main()
