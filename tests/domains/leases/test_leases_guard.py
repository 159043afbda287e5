"""The git guard in a real temporary repository: real `git commit`s run the installed hook."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.git_repo import git, make_repo

pytestmark = [pytest.mark.slow,  # real git repositories and hook processes
              pytest.mark.skipif(shutil.which("git") is None,
                                 reason="git is not installed (.ci/run installs it with apt; apt was unreachable)")]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path)


def env_for(db: Path, who: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VP_")}
    env["VP_DB_PATH"] = str(db)
    if who:
        env["VP_ORCHESTRATOR"] = who
    env.update(extra)
    return env


def guard(*args: str, env: dict[str, str], cwd: Path):
    return subprocess.run([sys.executable, "-m", "vantage_peers.cli", "guard", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def commit(repo: Path, path: str, env: dict[str, str]):
    f = repo / path
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(f"{path} {os.urandom(4).hex()}\n")
    git(repo, "add", path, env=env)
    out = git(repo, "commit", "-q", "-m", f"touch {path}", env=env, check=False)
    if out.returncode != 0:
        git(repo, "reset", "-q", "HEAD", "--", path, env=env)  # unstage what the hook refused
    return out


def test_guard_refuses_accepts_warns_and_chains(repo: Path, tmp_path: Path, app, tools):
    # bob reserves src/** in this repo (the tool resolves the directory to the repo root).
    res = tools.call("reserve_paths", paths=["src/**"], repo=str(repo), reason="refactoring the API",
                     callerOrchestrator="bob")
    assert res["granted"] and not res["conflicts"]
    db = app.settings.db_path
    # An existing pre-commit hook: it must keep running after install.
    hooks = repo / ".git" / "hooks"
    marker = tmp_path / "previous-hook-ran"
    (hooks / "pre-commit").write_text(f"#!/bin/sh\necho ran >> {marker}\nexit 0\n")
    (hooks / "pre-commit").chmod(0o755)
    previous = (hooks / "pre-commit").read_text()
    out = guard("install", "--repo", str(repo), env=env_for(db, None), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "kept your existing hook" in out.stdout
    assert guard("install", "--repo", str(repo), env=env_for(db, None), cwd=tmp_path).returncode == 0  # idempotent
    assert (hooks / "pre-commit.vp-previous").read_text() == previous

    # alice on bob's path: refused, with holder, reason, expiry and what to do.
    refused = commit(repo, "src/api.py", env_for(db, "alice"))
    assert refused.returncode != 0
    assert "commit refused" in refused.stderr and "bob" in refused.stderr
    assert "refactoring the API" in refused.stderr and "until" in refused.stderr
    assert "How to proceed" in refused.stderr and "release_paths" in refused.stderr
    assert marker.read_text().count("ran") == 1  # the previous hook ran first
    assert "src/api.py" not in git(repo, "log", "--name-only", "--format=").stdout

    # A free path: accepted. bob's own reserved path: accepted.
    assert commit(repo, "docs/free.md", env_for(db, "alice")).returncode == 0
    assert commit(repo, "src/mine.py", env_for(db, "bob")).returncode == 0
    # Unreachable database: a warning, and the commit passes.
    gone = commit(repo, "src/x.py", env_for(tmp_path / "missing" / "vp.db", "alice"))
    assert gone.returncode == 0 and "could not be reached" in gone.stderr
    # VP_GUARD=warn reports without refusing; off says nothing.
    warned = commit(repo, "src/y.py", env_for(db, "alice", VP_GUARD="warn"))
    assert warned.returncode == 0 and "bob" in warned.stderr
    off = commit(repo, "src/z.py", env_for(db, "alice", VP_GUARD="off"))
    assert off.returncode == 0 and "bob" not in off.stderr
    assert marker.read_text().count("ran") == 6  # the chained hook ran on every commit

    # Once bob releases, alice may commit there.
    assert tools.call("release_paths", paths=["src/**"], repo=str(repo), callerOrchestrator="bob")["count"] == 1
    assert commit(repo, "src/api.py", env_for(db, "alice")).returncode == 0

    # uninstall restores the previous hook byte for byte.
    assert guard("uninstall", "--repo", str(repo), env=env_for(db, None), cwd=tmp_path).returncode == 0
    assert (hooks / "pre-commit").read_text() == previous
    assert not (hooks / "pre-commit.vp-previous").exists()


def test_guard_in_a_worktree_and_a_failing_previous_hook(repo: Path, tmp_path: Path, app, tools):
    tools.call("reserve_paths", paths=["lib/*.py"], repo=str(repo), callerOrchestrator="bob", reason="perf")
    db = app.settings.db_path
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt), "-b", "side")
    # Installed from the worktree: the hook lands in the shared hooks directory.
    assert guard("install", "--repo", str(wt), env=env_for(db, None), cwd=tmp_path).returncode == 0
    assert (repo / ".git" / "hooks" / "pre-commit").is_file()
    refused = commit(wt, "lib/core.py", env_for(db, "alice"))
    assert refused.returncode != 0 and "perf" in refused.stderr  # same repo seen from the worktree
    assert commit(wt, "lib/sub/deep.py", env_for(db, "alice")).returncode == 0  # `*` stops at `/`
    # A check from another orchestrator whose identity comes from git config.
    git(wt, "config", "vantage-peers.orchestrator", "bob")
    assert commit(wt, "lib/core.py", env_for(db, None)).returncode == 0
    # A previous hook that fails still stops the commit (it runs first).
    assert guard("uninstall", "--repo", str(repo), env=env_for(db, None), cwd=tmp_path).returncode == 0
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'lint failed' >&2\nexit 3\n")
    hook.chmod(0o755)
    assert guard("install", "--repo", str(repo), env=env_for(db, None), cwd=tmp_path).returncode == 0
    failed = commit(repo, "free.txt", env_for(db, "alice"))
    assert failed.returncode != 0 and "lint failed" in failed.stderr


def test_guard_check_outside_git_and_hostile_staged_names(repo: Path, tmp_path: Path, app, tools):
    db = app.settings.db_path
    outside = tmp_path / "plain"
    outside.mkdir()
    out = guard("check", "--staged", env=env_for(db, "alice"), cwd=outside)
    assert out.returncode == 0 and "not inside a git repository" in out.stderr
    tools.call("reserve_paths", paths=["weird dir/*"], repo=str(repo), callerOrchestrator="bob")
    assert guard("install", "--repo", str(repo), env=env_for(db, None), cwd=tmp_path).returncode == 0
    assert commit(repo, "weird dir/ünïcode [x] *.txt", env_for(db, "alice")).returncode != 0
    assert commit(repo, "weird dir2/a.txt", env_for(db, "alice")).returncode == 0
