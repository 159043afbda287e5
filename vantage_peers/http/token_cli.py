"""`vantage-peers token`: an operator on the server machine manages OAuth clients and scope profiles.

  token create --name N --profile P [--redirect-uri U …] [--grant G …]   prints id and secret once
  token list                                                             live clients
  token revoke CLIENT_ID                                                 client + all its tokens
  token set-profile CLIENT_ID PROFILE                                    elevate / restrict a client
  token profile list | seed | show ID
  token profile set ID [--from A …] [--read P …] [--write P …] [--read-records own|team] [--description D]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    summary = "manage HTTP OAuth clients and scope profiles (operator, on the server machine)"
    p = sub.add_parser("token", help=summary, description=summary,
                       epilog="example:\n  vantage-peers token create --name ci-bot --profile cedar-agent "
                              "--grant client_credentials\n\nsettings read: VP_DB_PATH, VP_JOURNAL_MODE, VP_BUSY_TIMEOUT_MS",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    cmds = p.add_subparsers(dest="token_command", required=True)
    c = cmds.add_parser("create", help="create a client bound to a scope profile; prints its secret once")
    c.add_argument("--name", required=True)
    c.add_argument("--profile", required=True, help="scope profile id (see `token profile list`)")
    c.add_argument("--redirect-uri", action="append", default=[], help="for authorization_code clients")
    c.add_argument("--grant", action="append", default=[],
                   help="authorization_code, refresh_token, client_credentials (default: by redirect URIs)")
    c.add_argument("--basic", action="store_true", help="client_secret_basic instead of client_secret_post")
    cmds.add_parser("list", help="list live clients")
    r = cmds.add_parser("revoke", help="revoke a client and every token it holds")
    r.add_argument("client_id")
    s = cmds.add_parser("set-profile", help="move a client to another scope profile")
    s.add_argument("client_id")
    s.add_argument("profile")
    pr = cmds.add_parser("profile", help="scope profiles")
    pcmds = pr.add_subparsers(dest="profile_command", required=True)
    pcmds.add_parser("list")
    pcmds.add_parser("seed", help="insert the default profiles that are missing")
    show = pcmds.add_parser("show")
    show.add_argument("profile_id")
    ps = pcmds.add_parser("set", help="create or replace a profile")
    ps.add_argument("profile_id")
    ps.add_argument("--description", default="")
    ps.add_argument("--from", dest="from_", action="append", default=[], help="orchestrator the token may act as")
    ps.add_argument("--read", action="append", default=[], help="namespace prefix it may read")
    ps.add_argument("--write", action="append", default=[], help="namespace prefix it may write")
    ps.add_argument("--read-records", choices=("own", "team"), default="own",
                    help="whose messages and tasks it reads: own (those its identities are parties to; "
                         "default) or team (every one)")


def run_token(args: argparse.Namespace) -> int:
    from ..core.ids import now_ms
    from ..db import open_database
    from ..pipeline.settings import Settings
    from . import admin, profiles, store

    db = open_database(Settings.from_env())

    def out(value: Any) -> None:
        print(json.dumps(value, indent=2, ensure_ascii=False))

    try:
        cmd = args.token_command
        if cmd == "create":
            created = admin.create_client(db, name=args.name, profile=args.profile,
                                          redirect_uris=args.redirect_uri or None, grant_types=args.grant or None,
                                          auth_method="client_secret_basic" if args.basic else "client_secret_post",
                                          via="cli")
            out(created)
            print("Store client_secret now: only its SHA-256 is kept, it cannot be shown again.", file=sys.stderr)
        elif cmd == "list":
            out(db.read(lambda c: store.list_clients(c, now=now_ms())))
        elif cmd == "revoke":
            out(admin.revoke_client(db, args.client_id))
        elif cmd == "set-profile":
            out(admin.set_profile(db, args.client_id, args.profile))
        elif cmd == "profile":
            sub = args.profile_command
            if sub == "list":
                out([p.doc() for p in db.read(profiles.list_all)])
            elif sub == "seed":
                out({"seeded": db.write(profiles.seed_defaults)})
            elif sub == "show":
                out(db.read(lambda c: profiles.require(c, args.profile_id)).doc())
            elif sub == "set":
                out(admin.save_profile(db, {"profileId": args.profile_id, "description": args.description,
                                            "fromAllowList": args.from_, "namespaceReadPrefixes": args.read,
                                            "namespaceWritePrefixes": args.write,
                                            "recordReadScope": args.read_records}))
        return 0
    finally:
        db.close()
