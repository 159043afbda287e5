"""The plugin's server command (issue #30): the hooks run exactly it, never a package name fetched at run
time, and its first start in a fresh copy of the plugin works offline after one online start.

"Offline" is the hard case: UV_OFFLINE=1, proxies on a closed loopback port, and uv's cache holding
only what an online start left there minus the package index's metadata (`simple-v*`), which is
what uv has when the index answers must-revalidate (Artifactory, JFrog …) or its cached pages are
gone. Locked wheels are found by URL and hash without the index; a build backend that the lock does
not pin (hatchling) has to be resolved against the index, so a start that builds the package fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.plugin_helpers import HOOKS, PLUGIN

UV = shutil.which("uv")


def server_command(root: Path) -> list[str]:
    """The command plugin/.mcp.json starts the server with, for a plugin installed at `root`."""
    server = json.loads((root / ".mcp.json").read_text(encoding="utf-8"))["mcpServers"]["vantage-peers"]
    return [a.replace("${CLAUDE_PLUGIN_ROOT}", str(root)) for a in [server["command"], *server.get("args", [])]]


def test_hooks_run_the_plugins_own_server_command(monkeypatch, tmp_path):
    for path in HOOKS.glob("*.py"):
        assert "uvx vantage-peers" not in path.read_text(encoding="utf-8"), path.name
        assert '"uvx"' not in path.read_text(encoding="utf-8"), path.name
    monkeypatch.syspath_prepend(str(HOOKS))
    import _vp_wake

    for name in ("VP_WAKE_COMMAND", "CLAUDE_PLUGIN_ROOT"):
        monkeypatch.delenv(name, raising=False)
    assert _vp_wake.command() == server_command(PLUGIN)
    installed = tmp_path / "plugins" / "vp"
    installed.mkdir(parents=True)
    shutil.copy(PLUGIN / ".mcp.json", installed / ".mcp.json")
    monkeypatch.setenv("CLAUDE_PLUGIN_ROOT", str(installed))  # as Claude Code sets it for hooks
    assert _vp_wake.server_command() == server_command(installed) and str(installed) in _vp_wake.server_command()[-1]
    # Nothing there: no command (the hook passes silently), not a name looked up on an index.
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("CLAUDE_PLUGIN_ROOT")
    assert _vp_wake.command() is None
    # The server command is the package the plugin ships, run from its own folder.
    command = server_command(PLUGIN)
    assert "vantage-peers" not in command and not any(a.startswith("uvx") for a in command)
    assert command[-1] == str(PLUGIN / "server" / "launch.py")


def _copy_plugin(target: Path) -> Path:
    """The plugin as Claude Code installs it: the links' targets copied (no .venv, no caches)."""
    shutil.copytree(PLUGIN, target, symlinks=False, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    return target


def _clone_cache(target: Path) -> None:
    """A private uv cache holding what the user's has (hard links: cheap), without the index metadata
    and without lock files (whose locks would be shared with the user's uv)."""
    source = Path(subprocess.run([UV, "cache", "dir"], capture_output=True, text=True, timeout=60,
                                 check=True).stdout.strip())
    for folder, dirs, files in os.walk(source):
        rel = Path(folder).relative_to(source)
        dirs[:] = [d for d in dirs if not (rel == Path(".") and d.startswith("simple-v"))]
        (target / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            if name.endswith(".lock") or name.startswith(".tmp"):
                continue
            src, dst = Path(folder) / name, target / rel / name
            try:
                if src.is_symlink():
                    dst.symlink_to(os.readlink(src))
                else:
                    os.link(src, dst)
            except OSError:
                try:
                    shutil.copy2(src, dst)
                except OSError:
                    continue  # removed meanwhile by another uv: it will be fetched online if needed


def _env(tmp_path: Path, cache: Path, **extra: str) -> dict[str, str]:
    drop = ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "PYTHONPATH", "UV_OFFLINE", "CLAUDE_PLUGIN_ROOT")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VP_") and k not in drop}
    env.update({"UV_CACHE_DIR": str(cache), "VP_DB_PATH": str(tmp_path / "vp.db"), "VP_EMBEDDINGS": "none",
                "VP_SCHEDULER": "0"}, **extra)
    return env


@pytest.mark.skipif(UV is None, reason="uv is not on PATH: the plugin's server command needs it")
def test_first_start_of_a_fresh_copy_works_offline(tmp_path):
    cache = tmp_path / "uv-cache"
    _clone_cache(cache)
    # One online start, in a first copy of the plugin.
    first = _copy_plugin(tmp_path / "first")
    online = subprocess.run([*server_command(first), "--version"], cwd=tmp_path, env=_env(tmp_path, cache),
                            capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL)
    if online.returncode != 0 and any(w in online.stderr for w in ("Failed to fetch", "Failed to download",
                                                                    "dns error", "Connection refused")):
        pytest.skip(f"the online start could not reach the package index: {online.stderr[-500:]}")
    assert online.returncode == 0 and "vantage-peers" in online.stdout, online.stderr[-3000:]
    for stale in cache.glob("simple-v*"):  # the index metadata: gone, or must be revalidated
        shutil.rmtree(stale)

    # The first start of a fresh copy (a plugin update lands in a new folder), with no network at all.
    fresh = _copy_plugin(tmp_path / "fresh")
    work = tmp_path / "workspace"
    work.mkdir()
    dead = "http://127.0.0.1:9"
    env = _env(tmp_path, cache, UV_OFFLINE="1", HTTP_PROXY=dead, HTTPS_PROXY=dead, ALL_PROXY=dead,
               http_proxy=dead, https_proxy=dead, all_proxy=dead, NO_PROXY="", no_proxy="")
    proc = subprocess.Popen(server_command(fresh), cwd=work, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "offline-test", "version": "1"}}}
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        line = proc.stdout.readline()  # the first line on stdout is the answer: uv writes nothing there
        if not line:
            proc.kill()
            pytest.fail(f"no answer; stderr: {proc.stderr.read().decode(errors='replace')[-3000:]}")
        answer = json.loads(line)
        assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "vantage-peers", answer
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    # It ran in the copy's own .venv, into which the package was never built nor installed.
    venv = fresh / "server" / ".venv"
    assert venv.is_dir() and not list(venv.glob("lib*/python*/site-packages/vantage_peers*"))
    if shutil.which("git") is None:
        return
    # The git guard installed through the same command runs that package too (offline, from any shell).
    def git(*args: str):
        return subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=work,
                              env=env, capture_output=True, text=True, timeout=120)

    assert git("init", "-q").returncode == 0
    installed = subprocess.run([*server_command(fresh), "guard", "install", "--repo", str(work)], cwd=work,
                               env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert installed.returncode == 0, installed.stderr[-3000:]
    (work / "a.txt").write_text("a\n")
    assert git("add", "a.txt").returncode == 0
    shell = {k: v for k, v in env.items() if k not in ("VP_DB_PATH",)}
    committed = subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m",
                                "a"], cwd=work, env={**shell, "XDG_DATA_HOME": str(tmp_path / "xdg")},
                               capture_output=True, text=True, timeout=600)
    assert committed.returncode == 0, committed.stderr
    assert "vantage-peers guard: warning:" in committed.stderr and "no such file" in committed.stderr
    assert "not installed here" not in committed.stderr
