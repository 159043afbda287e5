"""Fixtures for the real-client tests: the npm-installed clients, a sealed environment for them.

Each client runs with a temporary HOME, telemetry, error reporting and auto-update off, any proxy-aware
outbound request sent to a closed loopback port, and uv offline (the plugin's server must start from
what is on the machine). They skip only when npm cannot fetch the clients, and say so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import install  # noqa: E402
from client_env import ROOT  # noqa: E402,F401


@pytest.fixture(scope="session")
def clients() -> Path:
    reason = install.install()
    if reason is not None:
        pytest.skip(f"real MCP clients not available: {reason}")
    return install.clients_dir()


@pytest.fixture(scope="session")
def uv_cache() -> str:
    """The uv cache the project's own `uv sync` filled (the sealed HOME would start an empty one)."""
    uv = [shutil.which("uv")] if shutil.which("uv") else [sys.executable, "-m", "uv"]
    done = subprocess.run([*uv, "cache", "dir"], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed once we return: connections to it are refused


@pytest.fixture
def sealed_env(tmp_path, clients, uv_cache) -> dict[str, str]:
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)  # Codex refuses a CODEX_HOME that does not exist
    dead = f"http://127.0.0.1:{closed_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VP_", "ANTHROPIC_", "OPENAI_", "CLAUDE"))}
    env.update({
        "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"), "CODEX_HOME": str(home / ".codex"),
        "PATH": f"{install.node_bin_dir()}{os.pathsep}{os.environ.get('PATH', '')}",
        # Claude Code: no auto-update, telemetry, error reports or other non-essential traffic
        "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1",
        "MCP_TIMEOUT": "120000",  # a slow machine: the plugin's first start creates its venv
        # anything that still tries the outside goes to a closed loopback port; loopback stays direct
        "HTTP_PROXY": dead, "HTTPS_PROXY": dead, "http_proxy": dead, "https_proxy": dead,
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
        "npm_config_update_notifier": "false", "NO_UPDATE_NOTIFIER": "1",
        # the plugin's server starts from the uv cache the project's own sync filled, offline
        "UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never",
        "VP_DB_PATH": str(tmp_path / "vp.db"), "VP_SCHEDULER": "off",
    })
    if uv_cache:
        env["UV_CACHE_DIR"] = uv_cache
    return env
