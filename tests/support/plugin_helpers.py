"""Helpers for the Claude Code plugin tests: paths, hook subprocess runs, frontmatter, tool names."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # the repository (this file is in tests/support/)
PLUGIN = ROOT / "plugin"
HOOKS = PLUGIN / "hooks"

HOOK_NAMES = (
    "enforce-evidence-bound-completion",
    "enforce-no-task-in-message",
    "enforce-task-quality",
    "block-time-estimates",
    "auto-compact-reminder",
    "enforce-mission-template",
    "enforce-brief-template",
    "inbox-digest",  # #21 wake-up hooks (tests/plugin/test_wake_hooks.py)
    "wake-on-message",
)
OPTIONAL_HOOKS = ("enforce-ship-24-7",)  # shipped as a script, opt-in, not in hooks.json
ALL_HOOKS = HOOK_NAMES + OPTIONAL_HOOKS

# A backticked tool reference: `name` or `name(...)`; nothing else in the texts is backticked snake_case.
TOOL_REF = re.compile(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)*)(?:\([^`]*\))?`", re.S)


def vp(tool: str, plugin_scoped: bool = False) -> str:
    """The tool name as Claude Code shows it for a .mcp.json server or the plugin-bundled one."""
    return f"mcp__plugin_vantage-peers_vantage-peers__{tool}" if plugin_scoped else f"mcp__vantage-peers__{tool}"


def event(tool_name: str, tool_input: Any, hook_event_name: str = "PreToolUse", **extra: Any) -> dict[str, Any]:
    """The JSON Claude Code sends a command hook on stdin for a tool event."""
    data = {
        "session_id": "abc123",
        "transcript_path": "/home/user/.claude/projects/x/transcript.jsonl",
        "cwd": "/home/user/my-project",
        "permission_mode": "default",
        "hook_event_name": hook_event_name,
        "tool_name": tool_name,
        "tool_input": tool_input,
        "tool_use_id": "toolu_01ABC123",
    }
    data.update(extra)
    return data


def run_hook(name: str, payload: Any = None, *, raw: bytes | None = None, env: dict[str, str] | None = None,
             script: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    data = raw if raw is not None else json.dumps(payload).encode()
    return subprocess.run(
        [sys.executable, str(script or HOOKS / f"{name}.py")], input=data, capture_output=True, timeout=60,
        env={**os.environ, **(env or {})})


def assert_passed(proc: subprocess.CompletedProcess[bytes]) -> None:
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == b"", proc.stdout.decode()


def assert_blocked(proc: subprocess.CompletedProcess[bytes], hook: str, *fragments: str) -> str:
    """Exit 2, the reason on stderr, and exactly the PreToolUse deny object on stdout."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    out = json.loads(proc.stdout)
    assert set(out) == {"hookSpecificOutput"}
    spec = out["hookSpecificOutput"]
    assert set(spec) == {"hookEventName", "permissionDecision", "permissionDecisionReason"}
    assert spec["hookEventName"] == "PreToolUse" and spec["permissionDecision"] == "deny"
    reason = spec["permissionDecisionReason"]
    assert reason == proc.stderr.decode().rstrip("\n")
    assert reason.startswith(f"BLOCKED by vantage-peers hook {hook}: ")
    assert "\nFix: " in reason
    for fragment in fragments:
        assert fragment in reason, (fragment, reason)
    return reason


def frontmatter(text: str) -> tuple[dict[str, str], str]:
    """Our frontmatter subset: `key: value` lines, values plain or single-quoted YAML."""
    assert text.startswith("---\n"), "frontmatter must open the file"
    head, _, body = text[4:].partition("\n---\n")
    fields: dict[str, str] = {}
    for line in head.splitlines():
        key, sep, value = line.partition(": ")
        assert sep and re.fullmatch(r"[a-z][a-z-]*", key), line
        if value.startswith("'"):
            assert value.endswith("'") and len(value) >= 2, line
            value = value[1:-1]
            assert "'" not in value.replace("''", ""), line
            value = value.replace("''", "'")
        fields[key] = value
    return fields, body


def tool_refs(text: str) -> set[str]:
    return set(TOOL_REF.findall(text))
