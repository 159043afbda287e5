"""Install the real MCP clients the tests drive, from npm, into a cache folder (idempotent).

`python tests/clients/install.py` (what `.ci/run` runs) installs whatever is absent into
`$VP_CLIENTS_DIR` (default /tmp/vp-clients): Node 22 as the npm package `node@22` (the MCP Inspector
needs Node >= 22 and the machine's node may be older), Claude Code, Codex and the MCP Inspector, each
in its own prefix at a pinned version. When npm or its registry cannot be reached it says so and
exits 0: the client tests then skip with that reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

# prefix name -> (npm package spec, the executable it brings)
CLIENTS: dict[str, tuple[str, str]] = {
    "node22": ("node@22", "node"),
    "claude": ("@anthropic-ai/claude-code@2.1.197", "claude"),
    "codex": ("@openai/codex@0.171.0", "codex"),
    "inspector": ("@modelcontextprotocol/inspector@2.12.0", "mcp-inspector"),
}


def clients_dir() -> Path:
    return Path(os.environ.get("VP_CLIENTS_DIR") or "/tmp/vp-clients")


def binary(name: str) -> Path:
    return clients_dir() / name / "node_modules" / ".bin" / CLIENTS[name][1]


def node_bin_dir() -> Path:
    return binary("node22").parent


def missing() -> list[str]:
    return [name for name in CLIENTS if not binary(name).exists()]


def install() -> str | None:
    """Install what is absent; None when all are present, else the reason they are not."""
    todo = missing()
    if not todo:
        return None
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed: the real-client tests need npm to fetch the clients"
    env = {**os.environ, "npm_config_update_notifier": "false", "npm_config_fund": "false",
           "npm_config_audit": "false"}
    try:  # one quick look first: an unreachable registry must not cost minutes of npm retries
        ping = subprocess.run([npm, "ping"], env=env, capture_output=True, text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return "npm ping timed out: the npm registry cannot be reached"
    if ping.returncode != 0:
        return "npm ping failed: the npm registry cannot be reached"
    if binary("node22").exists():  # later installs run their scripts with Node 22
        env["PATH"] = f"{node_bin_dir()}{os.pathsep}{env.get('PATH', '')}"
    for name in todo:
        prefix = clients_dir() / name
        prefix.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run([npm, "install", "--prefix", str(prefix), "--no-save", "--fetch-retries=2",
                                   "--fetch-timeout=60000", CLIENTS[name][0]],
                                  env=env, capture_output=True, text=True, timeout=600, check=False)
        except subprocess.TimeoutExpired:
            return f"npm install {CLIENTS[name][0]} timed out: the npm registry could not be reached"
        if done.returncode != 0 or not binary(name).exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return f"npm could not install {CLIENTS[name][0]} (registry unreachable?): {' | '.join(tail)}"
        if name == "node22":
            env["PATH"] = f"{node_bin_dir()}{os.pathsep}{env.get('PATH', '')}"
    return None


if __name__ == "__main__":
    reason = install()
    print(f"real MCP clients: {'installed in ' + str(clients_dir()) if reason is None else 'SKIPPED - ' + reason}")
    sys.exit(0)
