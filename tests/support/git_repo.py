"""A real git repository for the guard tests (test_leases_guard.py, test_guard_backends.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(repo: Path, *args: str, env: dict[str, str] | None = None, check: bool = True):
    out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env=env, timeout=120)
    if check and out.returncode != 0:
        raise AssertionError(f"git {args} failed: {out.stderr}")
    return out


def make_repo(where: Path) -> Path:
    """`where/repo`: a work tree on `main` with one commit (README)."""
    r = where / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    git(r, "config", "user.email", "t@example.com")
    git(r, "config", "user.name", "t")
    (r / "README").write_text("x\n")
    git(r, "add", "README")
    git(r, "commit", "-q", "-m", "init")
    return r
