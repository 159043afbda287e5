"""The git guard: a pre-commit hook refusing a commit that touches a path another orchestrator
reserved exclusively (reserve_paths).

`install` puts our hook at `git rev-parse --git-path hooks`/pre-commit (the hooks of the main
repository, shared by its worktrees; `core.hooksPath` is honoured by git itself), keeping an
existing hook as `pre-commit.vp-previous` and running it first; `uninstall` puts it back.

Which database (#30): the server's settings (Settings.from_env: VP_DATABASE_URL, else VP_DB_PATH or
the default file). When the committing shell names neither (an agent's shell does not inherit the
MCP server's environment), the workspace identity file the server wrote (identity_file.py) does.
Who "I" am: VP_ORCHESTRATOR, else `git config vantage-peers.orchestrator`, else the identity file;
unknown, every exclusive reservation counts as someone else's.

When the database cannot be checked: PostgreSQL configured (a team database) and unreachable or
unreadable → the commit is refused (fail closed: the team chose it, and silence would let any
commit through); a SQLite file that is not there or cannot be read → a warning and a pass (fail
open, as before). `VP_GUARD=warn` reports without refusing (either case), `VP_GUARD=off` skips the
check, `git commit --no-verify` skips every hook.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shlex
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

from . import identity_file
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
    """The hook runs this very interpreter on this very package: the folder it was imported from goes
    to PYTHONPATH (the plugin's launcher runs the package from its folder, not installed, #30), and
    `-P` keeps a `vantage_peers` folder in the repository being committed from shadowing it."""
    python = shlex.quote(sys.executable)
    package = shlex.quote(str(Path(__file__).resolve().parents[3]))
    return f"""#!/bin/sh
{MARKER}: installed by `vantage-peers guard install`; `vantage-peers guard uninstall` restores the previous hook.
hookdir=$(dirname "$0")
if [ -x "$hookdir/{PREVIOUS}" ]; then
    "$hookdir/{PREVIOUS}" "$@" || exit $?
fi
[ "${{VP_GUARD:-}}" = "off" ] && exit 0
if [ -x {python} ] && PYTHONPATH={package} {python} -P -c "import vantage_peers" >/dev/null 2>&1; then
    PYTHONPATH={package} exec {python} -P -m vantage_peers.cli guard check --staged
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


def _whoami(cwd: str, chosen: identity_file.Choice) -> tuple[str | None, str]:
    """(who commits, where that came from): VP_ORCHESTRATOR, git config, then the identity file."""
    me = os.environ.get("VP_ORCHESTRATOR", "").strip()
    if me:
        return me, "VP_ORCHESTRATOR"
    try:
        configured = _git(["config", "--get", "vantage-peers.orchestrator"], cwd).strip()
    except GuardError:
        configured = ""
    if configured:
        return configured, "git config vantage-peers.orchestrator"
    if chosen.orchestrator:
        note = f"; {chosen.note}" if chosen.note else ""
        return chosen.orchestrator, f"the identity file {chosen.path}{note}"
    return None, chosen.note or "no VP_ORCHESTRATOR, git config vantage-peers.orchestrator nor identity file"


def _when(ms: int, now: int) -> str:
    stamp = dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    minutes = max(0, (ms - now) // 60_000)
    return f"{stamp} (in {minutes // 60}h{minutes % 60:02d}m)" if minutes >= 60 else f"{stamp} (in {minutes}m)"


def staged_files(cwd: str) -> list[str]:
    raw = _git(["diff", "--cached", "--name-only", "--no-renames", "-z"], cwd)
    return [f for f in raw.split("\0") if f]


class Unchecked(Exception):
    """The staged paths could not be checked; `closed` = refuse the commit (PostgreSQL configured)."""

    def __init__(self, message: str, *, closed: bool) -> None:
        super().__init__(message)
        self.closed = closed


DB_NAMES = ("VP_DATABASE_URL", "VP_DB_PATH")


def _shell_names_database() -> bool:
    """Does this shell (its environment, or `.env` here as Settings reads it) choose the database?"""
    if any((os.environ.get(name) or "").strip() for name in DB_NAMES):
        return True
    dotenv = Path.cwd() / ".env"
    if dotenv.is_file():
        from dotenv import dotenv_values

        with contextlib.suppress(Exception):
            return any((dotenv_values(dotenv).get(name) or "").strip() for name in DB_NAMES)
    return False


def database_settings(chosen: identity_file.Choice):
    """(Settings, where the database came from): the server's own settings (Settings.from_env); when the
    shell names no database (VP_DATABASE_URL, VP_DB_PATH), the one in the workspace identity file."""
    from ...db.dialect import is_postgres_url
    from ...pipeline.settings import Settings

    try:
        settings = Settings.from_env()
    except Exception as exc:  # noqa: BLE001 - the server would not start with them either
        raise Unchecked(f"the settings are invalid ({exc})", closed=True) from exc
    settings = settings.model_copy(update={"pg_pool_size": 1})
    if _shell_names_database():
        return settings, "the environment"
    target = chosen.database
    if target and is_postgres_url(target.get("url")):
        return settings.model_copy(update={"database_url": target["url"]}), f"the identity file {chosen.path}"
    if target and target.get("path"):
        update = {"database_url": None, "db_path": Path(target["path"])}
        if target.get("journalMode") in ("wal", "delete", "truncate", "persist"):
            update["journal_mode"] = target["journalMode"]
        return settings.model_copy(update=update), f"the identity file {chosen.path}"
    return settings, "the default (no VP_DATABASE_URL, VP_DB_PATH nor identity file)"


def check(*, staged: bool = True, files: list[str] | None = None, cwd: str | None = None,
          err: TextIO = sys.stderr) -> int:
    """0 = commit may proceed, 1 = refused (reserved paths staged, or PostgreSQL configured and not
    reachable; VP_GUARD=warn reports instead, VP_GUARD=off skips)."""
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
    refuse = mode != "warn"
    chosen = identity_file.choose(cwd)
    me, me_from = _whoami(cwd, chosen)
    try:
        settings, db_from = database_settings(chosen)
        conflicts, now = _conflicts(paths, root, me, settings, db_from)
    except Unchecked as exc:
        if exc.closed and refuse:
            err.write(f"vantage-peers guard: commit refused: {exc}; the staged paths could not be checked against "
                      "path reservations.\nHow to proceed: make the database reachable from this shell (the "
                      "identity file never holds the password: put it in ~/.pgpass or PGPASSWORD, or export "
                      "VP_DATABASE_URL), then commit again. To commit unchecked once: VP_GUARD=warn git commit "
                      "… (or git commit --no-verify, which skips every hook).\n")
            return 1
        err.write(f"vantage-peers guard: warning: {exc}; commit not checked for reserved paths\n")
        return 0
    if not conflicts:
        return 0
    head = "commit refused" if refuse else "warning (VP_GUARD=warn)"
    err.write(f"vantage-peers guard: {head}: {len({c['path'] for c in conflicts})} staged path(s) are reserved "
              "exclusively by another agent:\n")
    for c in conflicts:
        why = f": {c['reason']}" if c.get("reason") else ""
        err.write(f"  {c['path']}  reserved by {c['holder']} as {c['reservedPath']!r} until "
                  f"{_when(c['expiresAt'], now)} (reservation {c['reservationId']}){why}\n")
    holders = ", ".join(sorted({c["holder"] for c in conflicts}))
    ids = sorted({c["reservationId"] for c in conflicts})
    err.write(f"Checked as {me or 'nobody (unknown committer)'} ({me_from}) against {db_from}.\n")
    err.write("How to proceed: wait until the reservation expires or is released; ask " + holders + " to "
              "release_paths (send_message); or unstage those files (git restore --staged PATH). If the holder is "
              "gone, its reservation lapses with its presence, or an operator (the master bearer or `system`) can "
              f"force_release_path_reservation(id=\"{ids[0]}\", reason=…). "
              + ("" if me else "If this reservation is yours, set VP_ORCHESTRATOR (or git config "
                 "vantage-peers.orchestrator) to your orchestrator id. ")
              + "To commit anyway (the escape hatch): git commit --no-verify, which skips every hook, or "
                "VP_GUARD=warn git commit … to report without refusing.\n")
    return 1 if refuse else 0


def _conflicts(paths: list[str], root: str, me: str | None, settings, db_from: str) -> tuple[list[dict], int]:
    from ...db import connect
    from . import paths as path_store

    postgres = bool(settings.database_url)
    if postgres:
        name = f"the PostgreSQL database {identity_file.strip_password(settings.database_url)} (from {db_from})"
    else:
        name = f"the database {settings.db_path} (from {db_from})"
        if not Path(settings.db_path).is_file():
            raise Unchecked(f"{name} could not be reached: there is no such file", closed=False)
    try:
        db = connect(settings, busy_timeout_ms=2_000)
    except Exception as exc:  # noqa: BLE001 - said below, with what to do
        raise Unchecked(f"{name} could not be reached ({exc})", closed=postgres) from exc
    try:
        now = int(time.time() * 1000)
        found = db.read(lambda c: path_store.staged_conflicts(c, files=paths, repo=root, me=me, now=now))
    except Exception as exc:  # noqa: BLE001
        raise Unchecked(f"{name} could not be read ({exc})", closed=postgres) from exc
    finally:
        db.close()
    return found, now
