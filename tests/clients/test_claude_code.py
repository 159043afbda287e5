"""The real Claude Code CLI against this checkout: plugin validation, marketplace install from a git
URL (served on loopback, as GitHub would serve it), and `claude mcp list` showing the plugin's server,
a stdio entry and an HTTP entry with a bearer connected — all with no network beyond 127.0.0.1."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import install
import pytest
from client_env import ROOT, run
from git_http import serve_repository, snapshot
from support.http_helpers import MASTER, script, serving


def claude(*args: str) -> list[str]:
    return [str(install.binary("claude")), *args]


def status_line(listing: str, name: str) -> str:
    lines = [ln for ln in listing.splitlines() if ln.startswith(f"{name}:")]
    assert len(lines) == 1, (name, listing)
    return lines[0]


def test_plugin_and_marketplace_validate(sealed_env, tmp_path):
    for target in (ROOT / "plugin", ROOT):
        for strict in ([], ["--strict"]):
            done = run(claude("plugin", "validate", *strict, str(target)), sealed_env, tmp_path)
            assert done.returncode == 0 and "Validation passed" in done.stdout, (target, strict, done)


def test_marketplace_install_then_every_server_connects(sealed_env, tmp_path):
    if shutil.which("uv", path=sealed_env["PATH"]) is None:
        pytest.skip("uv is not on PATH: the plugin's .mcp.json runs `uv` (install it with pip install uv)")
    project = tmp_path / "project"
    project.mkdir()
    repo = snapshot(ROOT, tmp_path / "snapshot")
    (tmp_path / "git").mkdir()
    with serve_repository(repo, tmp_path / "git") as url, serving(tmp_path / "served.db") as http:
        added = run(claude("plugin", "marketplace", "add", url), sealed_env, project)
        assert added.returncode == 0, added
        installed = run(claude("plugin", "install", "vantage-peers@vantage-peers"), sealed_env, project)
        assert installed.returncode == 0 and "Successfully installed" in installed.stdout, installed

        # the install copied the package itself (the links' targets), not links into the clone
        cache = Path(sealed_env["HOME"]) / ".claude" / "plugins" / "cache" / "vantage-peers" / "vantage-peers"
        (version,) = cache.iterdir()
        server_dir = version / "server"
        for name in ("pyproject.toml", "uv.lock", "vantage_peers"):
            assert (server_dir / name).exists() and not (server_dir / name).is_symlink(), name
        assert (server_dir / "vantage_peers" / "cli.py").is_file()
        assert not (version / "commands").exists()  # each workflow once: the skills only

        stdio = run(claude("mcp", "add", "vp-stdio", "-e", f"VP_DB_PATH={tmp_path / 'stdio.db'}",
                           "--", script()), sealed_env, project)
        assert stdio.returncode == 0, stdio
        bearer = run(claude("mcp", "add", "--transport", "http", "vp-http", http.url,
                            "--header", f"Authorization: Bearer {MASTER}"), sealed_env, project)
        assert bearer.returncode == 0, bearer
        wrong = run(claude("mcp", "add", "--transport", "http", "vp-wrong-bearer", http.url,
                           "--header", "Authorization: Bearer " + "0" * 64), sealed_env, project)
        assert wrong.returncode == 0, wrong

        listed = run(claude("mcp", "list"), sealed_env, project, timeout=300)
        assert listed.returncode == 0, listed
        plugin_line = status_line(listed.stdout, "plugin:vantage-peers:vantage-peers")
        assert "✔ Connected" in plugin_line, listed.stdout
        assert str(server_dir) in plugin_line  # started from the plugin cache, offline (UV_OFFLINE=1)
        assert "✔ Connected" in status_line(listed.stdout, "vp-stdio"), listed.stdout
        assert "✔ Connected" in status_line(listed.stdout, "vp-http"), listed.stdout
        # the test can fail: a server that refuses the bearer is not reported connected
        assert "✔ Connected" not in status_line(listed.stdout, "vp-wrong-bearer"), listed.stdout

        listed_plugins = run(claude("plugin", "list"), sealed_env, project)
        assert re.search(r"vantage-peers@vantage-peers[\s\S]*enabled", listed_plugins.stdout, re.I), listed_plugins
        # each workflow once: 9 skills (the command wrappers made Claude Code count 18)
        details = run(claude("plugin", "details", "vantage-peers@vantage-peers"), sealed_env, project)
        assert details.returncode == 0, details
        skills = re.search(r"Skills \((\d+)\)\s+(.+)", details.stdout)
        assert skills and skills.group(1) == "9", details.stdout
        names = [n.strip() for n in skills.group(2).split(",")]
        assert len(names) == len(set(names)) == 9 and "Commands" not in details.stdout
