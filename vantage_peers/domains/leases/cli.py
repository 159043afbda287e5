"""`vantage-peers guard install|uninstall|check`: the git pre-commit guard for path reservations.

Dispatched by cli.main before the database path is checked: `guard check` decides itself what an
unreachable database means (guard.py: PostgreSQL refuses, a missing SQLite file warns and passes).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    guard = sub.add_parser(
        "guard", help="git pre-commit guard refusing commits on paths another agent reserved (reserve_paths)",
        description="Install, remove or run the git pre-commit hook that refuses a commit touching a path "
                    "reserved exclusively by another orchestrator (docs/leases.md).",
        epilog="examples:\n  vantage-peers guard install --repo .\n  vantage-peers guard check --staged\n"
               "  VP_GUARD=warn git commit -m wip    # report, do not refuse\n"
               "  git commit --no-verify -m wip      # the escape hatch: skip every hook\n\n"
               "settings read: VP_DATABASE_URL, VP_DB_PATH, VP_JOURNAL_MODE, VP_ORCHESTRATOR (or git config\n"
               "  vantage-peers.orchestrator), VP_GUARD; what the shell does not set comes from the workspace\n"
               "  identity file the server writes ($(git rev-parse --git-dir)/vantage-peers/identity-<pid>.json).\n"
               "An unreachable PostgreSQL refuses the commit; a missing SQLite file warns (docs/leases.md).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = guard.add_subparsers(dest="guard_command", required=True)
    for verb, text in (("install", "add the pre-commit hook (an existing hook is kept and still runs first)"),
                       ("uninstall", "remove the hook and restore the previous one")):
        p = verbs.add_parser(verb, help=text, description=text)
        p.add_argument("--repo", help="repository (default: the current directory's)")
    p = verbs.add_parser("check", help="exit 1 if staged files touch another agent's exclusive reservation")
    p.add_argument("--staged", action="store_true", help="check the files staged for commit (what the hook runs)")
    p.add_argument("files", nargs="*", help="repo-relative files to check besides the staged ones")


def run(args: Any) -> int:
    from . import guard

    try:
        if args.guard_command == "install":
            return guard.install(args.repo)
        if args.guard_command == "uninstall":
            return guard.uninstall(args.repo)
        return guard.check(staged=args.staged, files=args.files)
    except guard.GuardError as exc:
        print(f"vantage-peers guard: {exc}", file=sys.stderr)
        return 2
