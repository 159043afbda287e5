"""Shared by the wake-up hooks (standard library only): run `vantage-peers wait` for this session.

Every hook here fails open (exit 0, nothing printed) when anything is off: no VP_ORCHESTRATOR,
no server command, malformed input, an error or a timeout. The command is the plugin's own server
command (.mcp.json: `python3 server/launch.py`), so a hook runs the very package the plugin ships. `VP_WAKE_HOOKS=off` (or 0,
false, no) turns them off. Each session keeps a state file of what was already reported
(`wait --state`), so a hook never reports the same message or task twice, nor wakes a session on
something it already put in the context.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import Any

MAX_INPUT_BYTES = 1024 * 1024
OFF = ("0", "off", "false", "no")


def enabled() -> bool:
    return (os.environ.get("VP_WAKE_HOOKS") or "on").strip().lower() not in OFF and bool(
        os.environ.get("VP_ORCHESTRATOR"))


def arm_budget(default: float) -> threading.Timer:
    """Exit 0 (fail open) if the hook is still running after VP_HOOK_TIMEOUT_SECONDS (or `default`)."""
    timer = threading.Timer(max(seconds("VP_HOOK_TIMEOUT_SECONDS", default), 0.05), lambda: os._exit(0))
    timer.daemon = True
    timer.start()
    return timer


def read_event() -> dict[str, Any]:
    """The event on stdin; an input that never ends is a silent pass after the hook's budget."""
    timer = arm_budget(5)
    try:
        data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    finally:
        timer.cancel()
    if len(data) > MAX_INPUT_BYTES:
        return {}
    try:
        event = json.loads(data.decode("utf-8", "replace") or "{}")
    except ValueError:
        return {}
    return event if isinstance(event, dict) else {}


def plugin_root() -> str:
    """The plugin's folder: CLAUDE_PLUGIN_ROOT as Claude Code sets it for hooks, else this file's parent's."""
    return os.environ.get("CLAUDE_PLUGIN_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def server_command() -> list[str] | None:
    """The plugin's own server command, read from its .mcp.json (the one that starts the MCP server)."""
    root = plugin_root()
    try:
        with open(os.path.join(root, ".mcp.json"), encoding="utf-8") as f:
            server = json.load(f)["mcpServers"]["vantage-peers"]
        argv = [server["command"], *server.get("args", [])]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not all(isinstance(a, str) for a in argv):
        return None
    return [a.replace("${CLAUDE_PLUGIN_ROOT}", root) for a in argv]


def command() -> list[str] | None:
    """VP_WAKE_COMMAND, else the plugin's own server command (its .mcp.json), else — hooks copied
    outside the plugin — `vantage-peers` on PATH. Never a package name fetched at run time (`uvx`):
    that would run whatever someone published under the name."""
    custom = os.environ.get("VP_WAKE_COMMAND")
    if custom:
        return shlex.split(custom)
    own = server_command()
    if own is not None:
        return own if shutil.which(own[0]) else None
    if shutil.which("vantage-peers"):
        return ["vantage-peers"]
    return None


def state_path(event: dict[str, Any], suffix: str = "json") -> str:
    """One file per Claude Code session (and orchestrator), in VP_HOOK_STATE_DIR or the temp directory."""
    base = os.environ.get("VP_HOOK_STATE_DIR") or os.path.join(tempfile.gettempdir(), "vantage-peers-hooks")
    os.makedirs(base, exist_ok=True)
    session = str(event.get("session_id") or "no-session")
    key = f"{session}\0{os.environ.get('VP_ORCHESTRATOR')}\0{os.environ.get('VP_INSTANCE_ID') or ''}"
    return os.path.join(base, f"wake-{hashlib.sha256(key.encode('utf-8', 'replace')).hexdigest()[:32]}.{suffix}")


def run_wait(event: dict[str, Any], timeout: float, budget: float) -> str | None:
    """The digest of what is new for this session (and mark it reported), or None."""
    cmd = command()
    if cmd is None:
        return None
    args = [*cmd, "wait", "--timeout", f"{timeout:g}", "--state", state_path(event)]
    try:
        done = subprocess.run(args, capture_output=True, timeout=budget, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    text = done.stdout.decode("utf-8", "replace").strip()
    return text or None


def seconds(name: str, default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(name) or default))
    except ValueError:
        return default
