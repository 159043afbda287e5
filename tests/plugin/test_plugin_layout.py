"""The Claude Code plugin's files, against a small schema of our own matching Claude Code's
documented structure: `.claude-plugin/plugin.json`, the repository's `.claude-plugin/marketplace.json`,
`hooks/hooks.json`, `.mcp.json`, skills and the agent. Also: the generated skills are in sync
with the workflow table, there are no command wrappers, every tool named
exists, and no path points outside the plugin.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.plugin_helpers import HOOK_NAMES, OPTIONAL_HOOKS, PLUGIN, ROOT, frontmatter, tool_refs, vp

from vantage_peers import __version__
from vantage_peers.prompts.plugin import expected_files
from vantage_peers.prompts.workflows import WORKFLOWS

KEBAB = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
SEMVER = re.compile(r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$")
HOOK_EVENTS = {"PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch", "Notification",
               "UserPromptSubmit", "UserPromptExpansion", "SessionStart", "SessionEnd", "Stop", "StopFailure",
               "SubagentStart", "SubagentStop", "PreCompact", "PostCompact", "PermissionRequest",
               "PermissionDenied", "Setup", "TeammateIdle", "TaskCreated", "TaskCompleted", "Elicitation",
               "ElicitationResult", "ConfigChange", "WorktreeCreate", "WorktreeRemove", "InstructionsLoaded",
               "CwdChanged", "FileChanged"}
MANIFEST_FIELDS = {"name", "version", "description", "author", "homepage", "repository", "license", "keywords",
                   "commands", "agents", "skills", "hooks", "mcpServers", "outputStyles", "lspServers", "userConfig"}
COMPONENT_PATHS = ("commands", "agents", "skills", "hooks", "mcpServers", "outputStyles", "lspServers")


def load(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def check_relative(value: str) -> None:
    """A manifest path: relative, starting with ./, no parent hops, forward slashes."""
    assert value.startswith("./") and ".." not in Path(value).parts and "\\" not in value, value


def test_plugin_manifest():
    manifest = load(PLUGIN / ".claude-plugin" / "plugin.json")
    assert set(manifest) <= MANIFEST_FIELDS, set(manifest) - MANIFEST_FIELDS
    assert KEBAB.match(manifest["name"]) and manifest["name"] == "vantage-peers"
    assert SEMVER.match(manifest["version"]) and manifest["version"] == __version__
    assert isinstance(manifest["description"], str) and manifest["description"]
    assert isinstance(manifest["author"], dict) and manifest["author"]["name"]
    assert all(isinstance(k, str) for k in manifest.get("keywords", []))
    for key in COMPONENT_PATHS:
        value = manifest.get(key)
        for item in ([value] if isinstance(value, str) else value if isinstance(value, list) else []):
            check_relative(item)
    # hooks/hooks.json is loaded by convention: naming it again is a "Duplicate hooks file" load error
    assert manifest.get("hooks") not in ("./hooks/hooks.json", "hooks/hooks.json")
    # the only file inside .claude-plugin/ is the manifest; components live at the plugin root
    assert sorted(p.name for p in (PLUGIN / ".claude-plugin").iterdir()) == ["plugin.json"]


def test_marketplace_lists_the_plugin_from_this_repository():
    market = load(ROOT / ".claude-plugin" / "marketplace.json")
    assert set(market) <= {"$schema", "name", "version", "description", "owner", "plugins", "metadata",
                           "forceRemoveDeletedPlugins", "allowCrossMarketplaceDependenciesOn"}
    assert KEBAB.match(market["name"]) and market["owner"]["name"]
    assert isinstance(market["plugins"], list) and len(market["plugins"]) == 1
    entry = market["plugins"][0]
    assert {"name", "source"} <= set(entry)
    assert isinstance(entry["source"], str) and entry["source"].startswith("./")
    check_relative(entry["source"])
    plugin_root = (ROOT / entry["source"]).resolve()
    assert plugin_root == PLUGIN.resolve()
    manifest = load(plugin_root / ".claude-plugin" / "plugin.json")
    assert entry["name"] == manifest["name"] and entry.get("version", manifest["version"]) == manifest["version"]


def hook_groups():
    doc = load(PLUGIN / "hooks" / "hooks.json")
    assert set(doc) <= {"description", "hooks"} and isinstance(doc["hooks"], dict)
    for event_name, groups in doc["hooks"].items():
        assert event_name in HOOK_EVENTS, event_name
        assert isinstance(groups, list) and groups
        for group in groups:
            assert set(group) <= {"matcher", "hooks"}
            yield event_name, group


def test_hooks_json_structure_and_scripts():
    referenced = set()
    for _event, group in hook_groups():
        if "matcher" in group:
            assert isinstance(group["matcher"], str)
            re.compile(group["matcher"])  # regex path (it holds characters outside the exact-match set)
        assert isinstance(group["hooks"], list) and group["hooks"]
        for handler in group["hooks"]:
            assert set(handler) <= {"type", "command", "timeout", "if", "statusMessage", "args", "async", "shell",
                                    "asyncRewake"}
            assert handler["type"] == "command"
            assert isinstance(handler["timeout"], int | float) and handler["timeout"] > 0
            match = re.fullmatch(r'python3 "\$\{CLAUDE_PLUGIN_ROOT\}/hooks/([a-z0-9-]+)\.py"', handler["command"])
            assert match, handler["command"]
            assert (PLUGIN / "hooks" / f"{match.group(1)}.py").is_file()
            referenced.add(match.group(1))
    assert referenced == set(HOOK_NAMES)
    scripts = {p.stem for p in (PLUGIN / "hooks").glob("*.py")} - {"_vp_hook", "_vp_wake"}
    assert scripts == set(HOOK_NAMES) | set(OPTIONAL_HOOKS)  # nothing stray, the opt-in one documented


# tool name (as Claude Code sends it) -> hooks that must fire for it; every other pairing must not
FIRES = {
    "complete_task": {"enforce-evidence-bound-completion"},
    "update_task": {"enforce-evidence-bound-completion", "block-time-estimates"},
    "send_message": {"enforce-no-task-in-message", "block-time-estimates"},
    "create_task": {"enforce-task-quality", "block-time-estimates"},
    "create_mission": {"enforce-mission-template", "block-time-estimates"},
    "check_messages": set(),
    "create_task_extra": set(),
}
BUILTIN_FIRES = {"Edit": {"block-time-estimates"}, "Write": {"block-time-estimates"},
                 "Task": {"enforce-brief-template"}, "Agent": {"enforce-brief-template"},
                 "NotebookEdit": set(), "Bash": set(), "TaskCreate": set()}


def pre_tool_hooks(tool: str) -> set[str]:
    fired = set()
    for event_name, group in hook_groups():
        if event_name == "PreToolUse" and re.search(group.get("matcher", ""), tool):
            fired |= {re.search(r"hooks/([a-z0-9-]+)\.py", h["command"]).group(1) for h in group["hooks"]}
    return fired


@pytest.mark.parametrize("scoped", [False, True])
def test_matchers_fire_for_the_documented_tools_only(scoped):
    for tool, hooks in FIRES.items():
        assert pre_tool_hooks(vp(tool, scoped)) == hooks, tool
    for tool, hooks in BUILTIN_FIRES.items():
        assert pre_tool_hooks(tool) == hooks, tool
    assert pre_tool_hooks("mcp__other-server__complete_task") == set()
    post = [g for e, g in hook_groups() if e == "PostToolUse"]
    assert all(re.search(g["matcher"], name) for g in post for name in ("Bash", vp("recall"), "Agent"))
    assert [e for e, _ in hook_groups() if e == "SessionStart"] == ["SessionStart"]


def test_mcp_server_wiring():
    servers = load(PLUGIN / ".mcp.json")["mcpServers"]
    assert set(servers) == {"vantage-peers"}
    stdio = servers["vantage-peers"]
    # the server runs from the package the install copied (plugin/server) through its launcher: locked
    # versions, no build (#30: the first start works offline), no index look-up of the name "vantage-peers"
    # (nobody else's package can be run in its place)
    assert stdio["command"] == "python3" and "type" not in stdio
    assert stdio["args"] == ["${CLAUDE_PLUGIN_ROOT}/server/launch.py"]
    launcher = (PLUGIN / "server" / "launch.py").read_text(encoding="utf-8")
    for needed in ('"--frozen"', '"--no-install-project"', '"--no-sync"', '"-P"', '"vantage_peers.cli"'):
        assert needed in launcher, needed
    assert "uvx" not in launcher
    server = PLUGIN / "server"
    assert (server / "pyproject.toml").resolve() == (ROOT / "pyproject.toml").resolve()
    assert (server / "uv.lock").resolve() == (ROOT / "uv.lock").resolve()
    assert (server / "vantage_peers" / "cli.py").resolve() == (ROOT / "vantage_peers" / "cli.py").resolve()
    for name, value in stdio["env"].items():
        assert value == "${" + name + ":-}"  # empty when unset: the server treats "" as not configured
    assert {"VP_ORCHESTRATOR", "VP_INSTANCE_ID", "VP_DB_PATH", "VP_DATABASE_URL"} <= set(stdio["env"])
    http = load(PLUGIN / "templates" / "mcp-http.json")["mcpServers"]["vantage-peers"]
    assert http["type"] == "http" and http["url"].endswith("/mcp")
    assert http["headers"]["Authorization"].startswith("Bearer ")


def test_generated_skills_and_commands_are_in_sync():
    expected = expected_files()
    for rel, text in expected.items():
        path = PLUGIN / rel
        assert path.read_text(encoding="utf-8") == text, f"{rel} is stale: run python -m vantage_peers.prompts.plugin"
    on_disk = {str(p.relative_to(PLUGIN)) for p in (PLUGIN / "skills").rglob("*") if p.is_file()}
    assert on_disk == set(expected)
    # a skill is its own slash command: no commands/ that only wrap the skills (each workflow once)
    assert not (PLUGIN / "commands").exists()


def test_skills_frontmatter():
    skills = sorted(p.name for p in (PLUGIN / "skills").iterdir())
    assert skills == sorted(w.name for w in WORKFLOWS) and len(skills) == 9
    for workflow in WORKFLOWS:
        fields, body = frontmatter((PLUGIN / "skills" / workflow.name / "SKILL.md").read_text(encoding="utf-8"))
        assert fields["name"] == workflow.name and re.fullmatch(r"[a-z0-9-]{1,64}", fields["name"])
        assert 0 < len(fields["description"]) <= 1024
        for phrase in workflow.triggers:
            assert f'"{phrase}"' in fields["description"]
        assert workflow.body in body and "$ARGUMENTS" in body


def test_agent_definition():
    fields, body = frontmatter((PLUGIN / "agents" / "vantage-peers-expert.md").read_text(encoding="utf-8"))
    assert fields["name"] == "vantage-peers-expert"
    for phrase in ("store this", "recall X", "create task", "set up VP", "send message to X", "fix pattern"):
        assert phrase in fields["description"]
    assert "VERIFICATION:" in body and "No memory found" in body
    assert sorted(p.name for p in (PLUGIN / "agents").iterdir()) == ["vantage-peers-expert.md"]


def test_every_tool_the_plugin_names_exists(tools):
    names = set(tools.listed)
    seen = set()
    for path in PLUGIN.rglob("*.md"):
        if (PLUGIN / "server") in path.parents:
            continue  # the package's own README, linked in for the server
        refs = tool_refs(path.read_text(encoding="utf-8"))
        assert refs <= names, (str(path.relative_to(PLUGIN)), sorted(refs - names))
        seen |= refs
    refs = tool_refs((PLUGIN / "templates" / "CLAUDE.md.append").read_text(encoding="utf-8"))
    assert refs <= names and refs
    assert len(seen) >= 60  # the expert agent's catalog alone names most of the server


SERVER_LINKS = ("pyproject.toml", "uv.lock", "README.md", "LICENSE", "schema.sql", "vantage_peers")
SERVER_FILES = ("launch.py",)  # the plugin's own server launcher (#30), a file of the plugin


def test_no_path_points_outside_the_plugin():
    root = PLUGIN.resolve()
    # server/ holds the only symlinks, to the package at the repository root: Claude Code copies
    # their targets into the plugin cache (proven by tests/clients/test_claude_code.py)
    server = PLUGIN / "server"
    assert {p.name for p in server.iterdir() if not p.name.startswith(".")} == {*SERVER_LINKS, *SERVER_FILES}
    for name in SERVER_LINKS:
        assert (server / name).is_symlink() and (server / name).resolve() == (ROOT / name).resolve()
    for name in SERVER_FILES:
        assert (server / name).is_file() and not (server / name).is_symlink()
    files = [p for p in PLUGIN.rglob("*") if (p.is_file() or p.is_symlink())
             and (server not in p.parents or p.name in SERVER_FILES) and p != server]
    assert files
    for path in files:
        assert path.resolve().is_relative_to(root), path  # no other symlink escapes
        if path.suffix in (".json", ".md", ".py", ".append"):
            text = path.read_text(encoding="utf-8")
            for ref in re.findall(r"\$\{CLAUDE_PLUGIN_ROOT\}/([^\"'\s)\\]+)", text):
                target = (root / ref).resolve()
                assert target.is_relative_to(root) and target.exists(), (path.name, ref)
            assert "${CLAUDE_PLUGIN_ROOT}/.." not in text
    for path in [PLUGIN / ".claude-plugin" / "plugin.json", PLUGIN / "hooks" / "hooks.json", PLUGIN / ".mcp.json"]:
        for value in _strings(load(path)):
            assert not value.startswith("/") and "/../" not in value and not value.startswith("../"), value


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_sdist_and_wheel_still_hold_the_package(tmp_path):
    """plugin/server links to the package; the build must neither drop vantage_peers/ (hatch
    de-duplicates by real path) nor ship it twice."""
    import shutil
    import subprocess
    import tarfile
    import zipfile

    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    done = subprocess.run([uv, "build", "-q", "--offline", "-o", str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    (sdist,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    assert any(n.endswith("/vantage_peers/cli.py") and "/plugin/" not in n for n in names)
    assert not any("/plugin/server/" in n for n in names)
    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert "vantage_peers/cli.py" in archive.namelist()
