"""Which repository a path reservation is about, when the caller does not say, and how its names compare.

A repo is identified by its main working tree (the directory holding the common `.git`), so that
agents in several worktrees of one repository see each other's reservations; outside git the
scope is '' (reservations shared by every caller that names no repo). A repo given by name
(`owner/name`, not a directory here) is compared case-insensitively, like GitHub's slugs: it is
stored lower case, so `Org/Repo` and `org/repo` are one scope.

Whether the paths *inside* a repo are case-insensitive (`case_insensitive`): git's own
`core.ignorecase` of the repository (git sets it by probing the file system when it creates or
clones the repository), or the file system itself (the repo directory looked up with its name's
case swapped); `VP_CASE_INSENSITIVE_PATHS=1|0` overrides both, and decides for repos given by name.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

from ...core.inline import off_loop

CASE_ENV = "VP_CASE_INSENSITIVE_PATHS"
_YES, _NO = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@functools.lru_cache(maxsize=256)
def repo_root(cwd: str) -> str | None:
    """The main working tree of the git repository containing `cwd`, or None outside git."""
    off_loop()  # runs git: not on the event loop (a quick call moves to a worker thread)
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
    """`repo` as given (a directory inside a git repo becomes that repo's root; a name is lower-cased),
    else the cwd's repo."""
    if repo:
        if os.path.isdir(repo):
            return repo_root(os.path.realpath(repo)) or os.path.realpath(repo)
        return repo.lower()
    return repo_root(cwd or os.getcwd()) or ""


def relative(path: str, root: str) -> str:
    """A path given absolute inside `root` as repo-relative (patterns are relative to the repo)."""
    base = root.rstrip("/")
    if root and path.rstrip("/") == base:
        return "."
    if root and path.startswith(base + "/"):
        return path[len(base) + 1:]
    return path


def case_insensitive(repo: str) -> bool:
    """Do paths in `repo` (a scope from `resolve`) name the same file whatever their case?"""
    forced = os.environ.get(CASE_ENV, "").strip().lower()
    if forced in _YES:
        return True
    if forced in _NO:
        return False
    return bool(repo) and os.path.isabs(repo) and _probe(repo)


@functools.lru_cache(maxsize=256)
def _probe(root: str) -> bool:
    if not os.path.isdir(root):
        return False
    off_loop()  # runs git: not on the event loop
    try:
        out = subprocess.run(["git", "config", "--type=bool", "--get", "core.ignorecase"], cwd=root,
                             capture_output=True, text=True, timeout=5, check=False)
        if out.returncode == 0 and out.stdout.strip() == "true":
            return True
    except (OSError, subprocess.SubprocessError):
        pass
    head, name = os.path.split(root.rstrip("/"))
    swapped = name.swapcase()
    if swapped == name:
        return False  # no cased letter to look up: git's word only
    try:
        return os.path.samefile(root, os.path.join(head, swapped))
    except OSError:
        return False
