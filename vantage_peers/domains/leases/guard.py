"""The git guard: a pre-commit hook refusing a commit that touches a path another orchestrator
reserved exclusively (reserve_paths).

`install` puts our hook at `git rev-parse --git-path hooks`/pre-commit (the hooks of the main
repository, shared by its worktrees; `core.hooksPath` is honoured by git itself), keeping an
existing hook as `pre-commit.vp-previous` and running it first; `uninstall` puts it back.
`check --staged` never blocks a commit because of the guard itself: a database it cannot reach,
or an older file without leases, is a warning and a pass. `VP_GUARD=warn` reports without
refusing, `VP_GUARD=off` skips the check.

Who "I" am: VP_ORCHESTRATOR, else `git config vantage-peers.orchestrator` (per worktree with
`git config --worktree`); unknown, every exclusive reservation counts as someone else's.
"""

from __future__ import annotations

import datetime as dt
import os
import shlex
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

from . import repo as repos

MARKER = "# vantage-peers guard"
PREVIOUS = "pre-commit.vp-previous"
HOOK = "pre-commit"


class GuardError(Exception):
    """A guard command that cannot do what was asked (not a git repo, a foreign hook in the way)."""


def _git(args: list[str], cwd: str | Path) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30, check=False)
    if out.returncode != 0:
        raise GuardError(f"git {' '.join(args)} failed in {cwd}: {out.stderr.strip() or out.returncode}")
    return out.stdout


def hooks_dir(repo: str | Path) -> Path:
    path = Path(_git(["rev-parse", "--git-path", "hooks"], repo).strip())
    return path if path.is_absolute() else (Path(repo) / path).resolve()


def hook_script() -> str:
    python = shlex.quote(sys.executable)
    return f"""#!/bin/sh
{MARKER}: installed by `vantage-peers guard install`; `vantage-peers guard uninstall` restores the previous hook.
hookdir=$(dirname "$0")
if [ -x "$hookdir/{PREVIOUS}" ]; then
    "$hookdir/{PREVIOUS}" "$@" || exit $?
fi
[ "${{VP_GUARD:-}}" = "off" ] && exit 0
if [ -x {python} ] && {python} -c "import vantage_peers" >/dev/null 2>&1; then
    exec {python} -m vantage_peers.cli guard check --staged
elif command -v vantage-peers >/dev/null 2>&1; then
    exec vantage-peers guard check --staged
fi
echo "vantage-peers guard: vantage-peers is not installed here; commit not checked for reserved paths" >&2
exit 0
"""


def install(repo: str | Path | None = None, out: TextIO = sys.stdout) -> int:
    where = Path(repo or os.getcwd()).resolve()
    hooks = hooks_dir(where)
    hooks.mkdir(parents=True, exist_ok=True)
    hook, previous = hooks / HOOK, hooks / PREVIOUS
    if hook.exists() and MARKER in hook.read_text(errors="replace"):
        hook.write_text(hook_script())  # refresh (a new interpreter path), keep what it chains to
        out.write(f"vantage-peers guard: already installed in {hook} (refreshed)\n")
        return 0
    if hook.exists() or hook.is_symlink():
        if previous.exists() or previous.is_symlink():
            raise GuardError(f"{previous} exists already and {hook} is not ours; move one of them away first")
        hook.rename(previous)  # kept intact (a symlink stays a symlink), run first by our hook
        out.write(f"vantage-peers guard: kept your existing hook as {previous}; it still runs first\n")
    hook.write_text(hook_script())
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH | stat.S_IRUSR)
    out.write(f"vantage-peers guard: installed {hook}\n")
    return 0


def uninstall(repo: str | Path | None = None, out: TextIO = sys.stdout) -> int:
    hooks = hooks_dir(Path(repo or os.getcwd()).resolve())
    hook, previous = hooks / HOOK, hooks / PREVIOUS
    if not hook.exists() or MARKER not in hook.read_text(errors="replace"):
        out.write(f"vantage-peers guard: not installed in {hooks}; nothing to do\n")
        return 0
    hook.unlink()
    if previous.exists() or previous.is_symlink():
        previous.rename(hook)
        out.write(f"vantage-peers guard: removed; your previous hook is back at {hook}\n")
    else:
        out.write(f"vantage-peers guard: removed {hook}\n")
    return 0


def _whoami(cwd: str) -> str | None:
    me = os.environ.get("VP_ORCHESTRATOR", "").strip()
    if me:
        return me
    try:
        return _git(["config", "--get", "vantage-peers.orchestrator"], cwd).strip() or None
    except GuardError:
        return None


def _when(ms: int, now: int) -> str:
    stamp = dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    minutes = max(0, (ms - now) // 60_000)
    return f"{stamp} (in {minutes // 60}h{minutes % 60:02d}m)" if minutes >= 60 else f"{stamp} (in {minutes}m)"


def staged_files(cwd: str) -> list[str]:
    raw = _git(["diff", "--cached", "--name-only", "--no-renames", "-z"], cwd)
    return [f for f in raw.split("\0") if f]


def check(*, staged: bool = True, files: list[str] | None = None, cwd: str | None = None,
          err: TextIO = sys.stderr) -> int:
    """0 = commit may proceed, 1 = refused (reserved paths staged and VP_GUARD is not warn/off)."""
    mode = os.environ.get("VP_GUARD", "").strip().lower() or "on"
    if mode == "off":
        return 0
    cwd = cwd or os.getcwd()
    root = repos.repo_root(cwd)
    if root is None:
        err.write("vantage-peers guard: not inside a git repository; nothing to check\n")
        return 0
    try:
        paths = list(files or []) + (staged_files(cwd) if staged else [])
    except GuardError as exc:
        err.write(f"vantage-peers guard: warning: cannot list staged files ({exc}); commit not checked\n")
        return 0
    if not paths:
        return 0
    me = _whoami(cwd)
    try:
        conflicts, now = _conflicts(paths, root, me)
    except Exception as exc:  # noqa: BLE001 - the guard must never be what breaks a commit
        err.write(f"vantage-peers guard: warning: the database could not be reached ({exc}); "
                  "commit not checked for reserved paths\n")
        return 0
    if not conflicts:
        return 0
    refuse = mode not in ("warn",)
    head = "commit refused" if refuse else "warning (VP_GUARD=warn)"
    err.write(f"vantage-peers guard: {head}: {len({c['path'] for c in conflicts})} staged path(s) are reserved "
              "exclusively by another agent:\n")
    for c in conflicts:
        why = f": {c['reason']}" if c.get("reason") else ""
        err.write(f"  {c['path']}  reserved by {c['holder']} as {c['reservedPath']!r} until "
                  f"{_when(c['expiresAt'], now)}{why}\n")
    holders = ", ".join(sorted({c["holder"] for c in conflicts}))
    err.write("How to proceed: ask " + holders + " to release_paths (send_message), wait for the expiry, or unstage "
              "those files (git restore --staged PATH). If the holder is gone, its reservation lapses with its "
              "presence, or the master / repo owner can force_release_path_reservation. "
              + ("" if me else "If this reservation is yours, set VP_ORCHESTRATOR (or git config "
                 "vantage-peers.orchestrator) to your orchestrator id. ")
              + "To commit anyway once: VP_GUARD=warn git commit ...\n")
    return 1 if refuse else 0


def _conflicts(paths: list[str], root: str, me: str | None) -> tuple[list[dict], int]:
    from ...db import Database
    from ...settings import Settings
    from . import paths as path_store

    settings = Settings.from_env()
    if not Path(settings.db_path).is_file():
        raise FileNotFoundError(f"no database at {settings.db_path} (VP_DB_PATH)")
    db = Database(settings.db_path, journal_mode=settings.journal_mode, busy_timeout_ms=2_000)
    try:
        now = int(time.time() * 1000)
        found = db.read(lambda c: path_store.staged_conflicts(c, files=paths, repo=root, me=me, now=now))
    finally:
        db.close()
    return found, now
