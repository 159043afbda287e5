"""Which repository a path reservation is about, when the caller does not say.

A repo is identified by its main working tree (the directory holding the common `.git`), so that
agents in several worktrees of one repository see each other's reservations; outside git the
scope is '' (reservations shared by every caller that names no repo).
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path


@functools.lru_cache(maxsize=256)
def repo_root(cwd: str) -> str | None:
    """The main working tree of the git repository containing `cwd`, or None outside git."""
    try:
        out = subprocess.run(["git", "rev-parse", "--git-common-dir"], cwd=cwd, capture_output=True, text=True,
                             timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    common = (Path(cwd) / out.stdout.strip()).resolve()
    return str(common.parent if common.name == ".git" else common)


def resolve(repo: str | None, cwd: str | None = None) -> str:
    """`repo` as given (a directory inside a git repo becomes that repo's root), else the cwd's repo."""
    if repo:
        if os.path.isdir(repo):
            return repo_root(os.path.realpath(repo)) or os.path.realpath(repo)
        return repo
    return repo_root(cwd or os.getcwd()) or ""


def relative(path: str, root: str) -> str:
    """A path given absolute inside `root` as repo-relative (patterns are relative to the repo)."""
    if root and path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1:]
    return path
