"""Toolsets through the SDK client: VP_TOOLSETS, enable_toolset, list_changed, TOOLSET_DISABLED."""

from __future__ import annotations

import anyio
import pytest
from conftest import make_settings, open_tools
from mcp import Client
from support.paths import REPO

from vantage_peers.core.errors import InvalidArgument
from vantage_peers.pipeline import toolsets
from vantage_peers.pipeline.settings import Settings
from vantage_peers.server import create_app, domain_modules


@pytest.fixture
def core_app(db_path):
    app = create_app(make_settings(db_path, toolsets=toolsets.parse_toolsets("core")))
    yield app
    app.db.close()


def test_every_domain_and_tool_has_a_known_toolset(app):
    for domain in domain_modules():
        assert domain in toolsets.DOMAIN_TOOLSETS, f"add {domain} to toolsets.DOMAIN_TOOLSETS"
    assert set(toolsets.DOMAIN_TOOLSETS.values()) | {toolsets.DEFAULT_TOOLSET} <= set(toolsets.TOOLSETS)
    assert set(app.toolset_of) == {t.name for t in app.tools}
    assert toolsets.toolset_for_module("vantage_peers.domains.not_mapped_yet.tools") == toolsets.DEFAULT_TOOLSET
    for reserved, expected in (("recurring", "automation"), ("github", "github"), ("bundles", "admin"),
                               ("iframe", "admin")):
        assert toolsets.toolset_for_module(f"vantage_peers.domains.{reserved}.tools") == expected


def test_core_comes_first_in_every_configuration(tools, app):
    names = list(tools.listed)
    assert names[:2] == ["list_toolsets", "enable_toolset"]
    kinds = [app.toolset_of[n] for n in names]
    last_core = max(i for i, k in enumerate(kinds) if k == "core")
    assert all(k == "core" for k in kinds[:last_core + 1])
    assert last_core + 1 <= 40, "core must fit Cursor's 40-tool cap"
    for name in ("set_summary", "check_messages", "list_tasks", "recall", "send_message", "create_task",
                 "store_memory"):
        assert app.toolset_of[name] == "core"


def test_vp_toolsets_parsing():
    assert toolsets.parse_toolsets(None) == ("all",)
    assert toolsets.parse_toolsets(" Records , missions") == ("core", "records", "missions")
    with pytest.raises(InvalidArgument, match="unknown toolset"):
        toolsets.parse_toolsets("core,recrods")
    assert Settings.from_env({"VP_TOOLSETS": "records"}, dotenv=False).toolsets == ("core", "records")


def test_core_lists_only_core_and_a_disabled_tool_names_its_toolset(core_app):
    with open_tools(core_app) as tools:
        assert {core_app.toolset_of[n] for n in tools.listed} == {"core"}
        assert len(tools.listed) == sum(1 for t in core_app.tools if core_app.toolset_of[t.name] == "core")
        msg = tools.error("create_bu", name="b", description="d", purpose="p", orchestratorId="alice")
        assert 'TOOLSET_DISABLED' in msg and 'call enable_toolset("records")' in msg
        assert "no toolset named 'recrods'; did you mean 'records'?" in tools.error("enable_toolset", name="recrods")
        listed = tools.call("list_toolsets")["items"]
        assert {t["name"]: t["enabled"] for t in listed}["records"] is False
        assert "create_bu" in {t["name"]: t for t in listed}["records"]["tools"]


def test_enable_toolset_adds_tools_and_notifies_a_modern_client(core_app):
    async def scenario():
        async with Client(core_app.mcp) as client:
            before = {t.name for t in (await client.list_tools()).tools}
            assert "create_bu" not in before
            async with client.listen(tools_list_changed=True) as events:
                result = await client.call_tool("enable_toolset", {"name": "records"})
                assert not result.is_error
                with anyio.fail_after(5):
                    event = await events.__anext__()
            assert type(event).__name__ == "ToolsListChanged"
            added = result.structured_content["added"]
            after = {t.name for t in (await client.list_tools()).tools}
            assert after == before | set(added) and "create_bu" in after
            made = await client.call_tool("create_bu", {"name": "b", "description": "d", "purpose": "p",
                                                        "orchestratorId": "alice", "createdBy": "alice"})
            assert not made.is_error
            again = await client.call_tool("enable_toolset", {"name": "records"})
            assert again.structured_content["added"] == []

    anyio.run(scenario)


def test_enable_toolset_notifies_a_handshake_era_client(core_app):
    async def scenario():
        seen = []

        async def on_message(message):
            seen.append(getattr(message, "method", None))

        async with Client(core_app.mcp, mode="legacy", message_handler=on_message) as client:
            assert client.server_capabilities.tools.list_changed is True
            assert len((await client.list_tools()).tools) < len(core_app.tools)
            result = await client.call_tool("enable_toolset", {"name": "all"})
            assert not result.is_error
            with anyio.fail_after(5):
                while "notifications/tools/list_changed" not in seen:
                    await anyio.sleep(0.01)
            assert len((await client.list_tools()).tools) == len(core_app.tools)

    anyio.run(scenario)


def _readme_toolsets() -> tuple[dict[str, int], dict[str, tuple[str, int]], str]:
    """The README's Toolsets table (name -> count), its per-client table (client -> (VP_TOOLSETS, count))
    and the whole text."""
    import re

    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Toolsets\n", 1)[1].split("\n## ", 1)[0]
    counts = {m[1]: (0 if m[2] == "—" else int(m[2]))
              for m in re.finditer(r"^\| `([a-z]+)` \| (\d+|—) \|", section, re.M)}
    clients = {m[1]: (m[2], int(m[3]))
               for m in re.finditer(r"^\| ([A-Za-z]+) \| [^|]+ \| `([a-z,]+)` \((\d+) tools\) \|", section, re.M)}
    return counts, clients, text


def test_the_readme_toolset_table_matches_the_server(app):
    """#30: the counts are generated from the running server, not typed: a moved tool fails here."""
    import collections

    served = collections.Counter(app.toolset_of[t.name] for t in app.tools)
    counts, clients, text = _readme_toolsets()
    assert list(counts) == list(toolsets.TOOLSETS), "one README row per toolset, in listing order"
    assert counts == {name: served.get(name, 0) for name in toolsets.TOOLSETS}
    for tool in ("acknowledge_message", "get_message_delivery"):  # every agent is told to acknowledge
        assert app.toolset_of[tool] == "core"
    caps = {"Cursor": 40, "Windsurf": 50}
    assert set(clients) == set(caps)
    for client, (chosen, said) in clients.items():
        total = sum(served[name] for name in toolsets.parse_toolsets(chosen))
        assert said == total <= caps[client], (client, chosen, said, total)
        assert f"{client}, {total} tools" in " ".join(text.split()), f"the Cursor/Windsurf setup line for {client}"
