"""`vantage-peers`: the stdio MCP server (default) and its maintenance commands.

Every command reads the settings and checks VP_DB_PATH first: a path SQLite could not open for
writing is one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys

from . import __version__

# Settings every command reads (the database and its journal); each command lists its own extras.
DB_SETTINGS = "VP_DB_PATH, VP_JOURNAL_MODE, VP_BUSY_TIMEOUT_MS"

TTY_HINT = ("vantage-peers speaks MCP over stdio: it is started by an MCP client, not typed into. "
            "Add it to your client (e.g. `claude mcp add vantage-peers -e VP_ORCHESTRATOR=alice -- uvx vantage-peers`), "
            "or run `vantage-peers status` / `vantage-peers doctor`. Ctrl-C to quit.")


# The stdio server's first scheduler tick waits this long (or a write's wake): it registers every
# domain and runs every job, which would otherwise share the CPU with the client's handshake (#34).
FIRST_TICK_DELAY_S = 2.0


def _run_stdio() -> int:
    from .domains.leases.identity_file import publish
    from .pipeline.settings import Settings
    from .server import create_app

    app = create_app(Settings.from_env(), lazy=True)  # #34: domains of toolsets that are off load on need
    publish(app.settings)  # #30: who works in this git work tree, on which database, for the git guard
    if sys.stdin is not None and sys.stdin.isatty():
        print(TTY_HINT, file=sys.stderr, flush=True)
    from .domains.profiles import liveness

    heartbeat = liveness.start(app, "stdio")  # #30: this process's row and heartbeat (docs/presence.md)
    scheduler = None
    if app.settings.scheduler:
        from .pipeline.scheduler import Scheduler

        scheduler = Scheduler(app)
        scheduler.start(delay=FIRST_TICK_DELAY_S)
    try:
        import anyio

        from .transport import serve_stdio

        started()
        anyio.run(serve_stdio, app.mcp)  # our transport answers every line, even unparseable ones
    finally:
        heartbeat.stop()  # a clean stop: stoppedAt
        if scheduler is not None:
            scheduler.stop()
            # #20: a short-lived process embeds what it wrote (bounded, ~2 s) before it exits (a
            # process whose domains never registered wrote nothing: deferred.py).
            later = app.deferred
            if later is None or not later.holds("memory"):
                from .domains.memory.exit_flush import embed_before_exit

                embed_before_exit(app)
        app.db.close()
    return 0


def _reindex() -> int:
    from .domains.memory.maintenance import reindex
    from .server import create_app

    # #20: the corpora to re-embed are those the domains register on the app; the MCP server on it is
    # not built (serve=False): reindex serves no tool.
    app = create_app(serve=False)
    try:
        return reindex(app.settings, app.db, corpora=app.corpora)
    finally:
        app.db.close()


def command(sub, name: str, summary: str, *, example: str, settings: str = "") -> argparse.ArgumentParser:
    """A subcommand whose --help ends with an example and the settings it reads."""
    read = DB_SETTINGS + (f", {settings}" if settings else "")
    return sub.add_parser(name, help=summary, description=summary,
                          epilog=f"example:\n  {example}\n\nsettings read: {read}",
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vantage-peers",
        description="Local MCP server on one SQLite file. With no command it serves MCP over stdio.",
        epilog=("examples:\n"
                "  claude mcp add vantage-peers -e VP_ORCHESTRATOR=alice -- uvx vantage-peers\n"
                "  VP_ORCHESTRATOR=alice VP_TOOLSETS=core vantage-peers   # what an MCP client runs\n"
                "  vantage-peers status\n\n"
                f"settings read by the server: {DB_SETTINGS}, VP_ORCHESTRATOR, VP_INSTANCE_ID, VP_TOOLSETS,\n"
                "  VP_SCHEDULER, VP_TICK_SECONDS, VP_EMBEDDINGS, VP_EMBEDDING_MODEL, VP_EMBEDDING_DIMENSIONS,\n"
                "  OPENAI_API_KEY / AI_GATEWAY_API_KEY, OPENAI_BASE_URL / AI_GATEWAY_BASE_URL,\n"
                "  VP_MAX_SEGMENT_MINUTES, VP_PRESENCE_INTERVAL_SECONDS\n"
                "(from the environment, then `.env` in the working directory: VP_* only unless it sets VP_EMBEDDINGS)"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"vantage-peers {__version__}")
    sub = parser.add_subparsers(dest="command")
    command(sub, "doctor", "print the settings in force and check them; exits non-zero on a failed check",
            example="VP_DB_PATH=/shared/team.db vantage-peers doctor",
            settings="and every other setting that has an effect (secrets shown as set/unset, never their value)")
    command(sub, "reindex", "re-embed every memory and fix pattern with the configured model (progress on stderr)",
            example="VP_EMBEDDING_MODEL=text-embedding-3-large vantage-peers reindex",
            settings="VP_EMBEDDINGS, VP_EMBEDDING_MODEL, VP_EMBEDDING_DIMENSIONS, OPENAI_API_KEY, OPENAI_BASE_URL")
    status = command(sub, "status", "show peers and their last seen, unread messages, open tasks and scheduler jobs",
                     example="vantage-peers status --json | jq .unread", settings="VP_TICK_SECONDS")
    status.add_argument("--json", action="store_true", help="print one JSON object (for scripts)")
    serve = command(sub, "serve", "serve the same tools over streamable HTTP at /mcp (OAuth 2.1 + bearer auth)",
                    example="BEARER_SECRET_MASTER=$(openssl rand -hex 32) vantage-peers serve --port 3000",
                    settings="HOST, PORT, PUBLIC_BASE_URL, BEARER_SECRET_MASTER, VP_ACCESS_TOKEN_TTL_SECONDS, "
                             "VP_REFRESH_TOKEN_TTL_SECONDS, CLERK_JWT_ISSUER_DOMAIN, VP_ALLOWED_EXT_IDS, "
                             "GITHUB_WEBHOOK_SECRET, and every server setting")
    serve.add_argument("--host", help="bind address (default HOST or 127.0.0.1; 0.0.0.0 exposes it to the network)")
    serve.add_argument("--port", type=int, help="port (default PORT or 3000)")
    serve.add_argument("--workers", type=int, default=1,
                       help="worker processes accepting on the port (default 1; one process uses about one core)")
    serve.add_argument("--no-auth", action="store_true",
                       help="no authentication (loopback hosts only; local testing)")
    # issue 23: the web dashboard (loopback only; `serve` mounts it at /dashboard behind sign-in)
    dash = command(sub, "dashboard", "open the live web dashboard of the team on 127.0.0.1 (no sign-in on loopback)",
                   example="vantage-peers dashboard --port 8765 --open", settings="BEARER_SECRET_MASTER (serve only)")
    dash.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (default 8765)")
    dash.add_argument("--open", action="store_true", help="open it in the default browser")
    dash.add_argument("--name", help="your name, shown to agents as human:<name> (default: your login name)")
    # #21: block until a message or task arrives for VP_ORCHESTRATOR (wake.py; the plugin's Stop hook runs it).
    wait = command(sub, "wait", "block until a message or task is new for VP_ORCHESTRATOR, print a digest; "
                   "exit 3 on timeout, 2 on a bad argument (docs/delivery.md)",
                   example="vantage-peers wait --timeout 1800",
                   settings="VP_ORCHESTRATOR, VP_INSTANCE_ID, VP_STATE_DIR, VP_WAIT_URL, VP_BEARER_TOKEN")
    wait.add_argument("--for", dest="kinds", default="messages,tasks",
                      help="a comma list of what to wait for: messages, tasks (assigned to you), work (tasks "
                           "you may claim: new, unblocked or lapsed) (default: messages,tasks)")
    wait.add_argument("--timeout", type=float, default=None, help="seconds (default: forever; 0 checks once)")
    wait.add_argument("--json", action="store_true", help="print one JSON object (≤ 1 KB)")
    since = wait.add_mutually_exclusive_group()
    since.add_argument("--state", help="file remembering what was reported (hooks: one per session); default: one "
                                       "per database, orchestrator and instance in VP_STATE_DIR or the user's state "
                                       "folder, so what is already pending counts and nothing is reported twice")
    since.add_argument("--since-now", action="store_true",
                       help="no state: only what becomes pending after the start is new (the old behaviour)")
    wait.add_argument("--url", default=None, help="wait through a `vantage-peers serve` push stream (no database "
                                                  "here); a comma list of replicas is tried in turn (env VP_WAIT_URL)")
    wait.add_argument("--token", default=None, help="the bearer token for --url (env VP_BEARER_TOKEN)")
    wait.add_argument("--ready-fd", type=int, default=None, metavar="N",
                      help="write 'ready\\n' to file descriptor N once armed (also said on stderr), then close it")
    from .http.token_cli import add_parser as add_token_parser

    add_token_parser(sub)
    from .domains.bundles.cli import add_commands as bundle_commands  # export, import, backup, restore

    parser.vp_handlers = bundle_commands(sub)  # type: ignore[attr-defined]
    from .domains.leases import cli as leases_cli

    leases_cli.add_parser(sub)  # leases (#22): guard install|uninstall|check
    # #25: copy everything between the SQLite file and PostgreSQL (db/migrate_db.py), verified by checksums.
    summary = ("copy every row between a SQLite file and PostgreSQL (either way), then verify counts and "
               "checksums per table; exit 1 on a mismatch (docs/scale.md)")
    move = sub.add_parser("migrate-db", help=summary, description=summary,
                          formatter_class=argparse.RawDescriptionHelpFormatter,
                          epilog="example:\n  vantage-peers migrate-db --from ~/.local/share/vantage-peers/"
                                 "vantage-peers.db --to postgresql://vp@db.internal/vp\n\nsettings read: none "
                                 "(--from and --to name both databases)")
    move.add_argument("--from", dest="source", required=True, help="the database to copy: a file or postgresql://…")
    move.add_argument("--to", dest="target", required=True,
                      help="an empty database (migrated first): a file (created) or postgresql://…")
    move.add_argument("--force", action="store_true", help="delete the target's rows first instead of refusing")
    move.add_argument("--verify-only", action="store_true", help="copy nothing: compare the two databases")
    move.add_argument("--batch-size", type=int, default=1000, help="rows fetched and written at a time (1000)")
    # #25: `--database-url` before or after any command sets VP_DATABASE_URL for it.
    url_help = "PostgreSQL instead of the SQLite file: sets VP_DATABASE_URL (postgresql://user@host/db)"
    parser.add_argument("--database-url", dest="database_url", default=None, help=url_help)
    pending = list(sub.choices.values())
    while pending:  # every command and sub-command (token create, guard install…)
        each = pending.pop()
        if "--database-url" in each._option_string_actions:  # an alias of a parser already done
            continue
        each.add_argument("--database-url", dest="database_url", default=argparse.SUPPRESS, help=url_help)
        pending += [p for a in each._actions if isinstance(a, argparse._SubParsersAction) for p in a.choices.values()]
    return parser


def main(argv: list[str] | None = None) -> int:
    from .core.safe_stderr import install

    install()  # #19: a log line that cannot be written (full disk) never fails a call
    if argv is None:
        # #34: no cyclic collection while the process imports and builds (hundreds of thousands of
        # objects, none of them garbage): ~10 % of the start. `started()` turns it back on.
        import gc

        gc.disable()
    try:
        return _main(argv)
    finally:
        if argv is None:  # the process's own command (not a test calling main): it ends here
            # #32 item 8, #34: at exit the interpreter runs full collections over everything imported
            # (mcp and pydantic: ~85k objects, 0.2 s or more each on a loaded machine); frozen objects
            # are skipped. The command's output is written and its database closed; atexit handlers
            # still run.
            import gc

            gc.freeze()


def started() -> None:
    """The process has imported and built what it keeps: those objects are frozen out of every later
    collection (they live until exit), and cyclic collection is on again for what the command makes."""
    import gc

    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def _main(argv: list[str] | None) -> int:
    if not (sys.argv[1:] if argv is None else argv):
        # The stdio server, what an MCP client starts: no command, so no parser to build (#34: the
        # parser imports every command's module).
        args, handlers = argparse.Namespace(command=None, database_url=None), {}
    else:
        parser = build_parser()
        args = parser.parse_args(argv)
        handlers = parser.vp_handlers  # type: ignore[attr-defined]
    if args.database_url:  # #25: the option wins over the environment, for this process and its children
        import os

        os.environ["VP_DATABASE_URL"] = args.database_url
    try:
        if args.command in ("migrate-db", "guard"):
            started()
        if args.command == "migrate-db":  # #25: names both databases itself; VP_DB_PATH plays no part
            from .db.migrate_db import run as run_transfer

            return run_transfer(args.source, args.target, force=args.force, verify_only=args.verify_only,
                                batch=args.batch_size)
        if args.command == "guard":  # leases (#22): before the DB check, an unreachable DB only warns
            from .domains.leases.cli import run as run_guard

            return run_guard(args)
        from .pipeline.settings import Settings, check_db_path

        check_db_path(Settings.from_env().db_path)
        if args.command not in (None, "status"):  # the server turns it on once built; status is one short read
            started()
        if args.command == "doctor":
            from .doctor import run_doctor

            return run_doctor()
        if args.command == "reindex":
            return _reindex()
        if args.command == "status":
            from .status import run_status

            return run_status(as_json=args.json)
        if args.command == "wait":
            from .wake import run_wait

            try:
                return run_wait(kinds_text=args.kinds, timeout=args.timeout, as_json=args.json, state=args.state,
                                since_now=args.since_now, ready_fd=args.ready_fd, url=args.url, token=args.token)
            finally:
                # #32 item 8: the process lingered ~1 s after its digest (see main).
                import gc

                gc.freeze()
        if args.command in handlers:
            return handlers[args.command](args)
        if args.command == "serve":
            from .dashboard.mount import mount_dashboard
            from .http.serve import run_serve

            return run_serve(args.host, args.port, no_auth=args.no_auth, workers=args.workers, mount=mount_dashboard)
        if args.command == "dashboard":  # issue 23
            from .dashboard.cli import run_dashboard

            return run_dashboard(args.port, open_browser=args.open, name=args.name)
        if args.command == "token":
            from .http.token_cli import run_token

            return run_token(args)
        return _run_stdio()
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `vantage-peers status | head`
        return 0
    except Exception as exc:  # noqa: BLE001 - a clean one-line error beats a traceback on the CLI
        from .core.errors import VantageError

        if isinstance(exc, VantageError):
            print(f"vantage-peers: {exc}", file=sys.stderr)
            return 2
        line = _database_error(exc)
        if line:
            print(f"vantage-peers: {line}", file=sys.stderr)
            return 2
        raise


def _database_error(exc: BaseException) -> str | None:
    """One line for the ways SQLite refuses a file (not a database, read-only, cannot open)."""
    import apsw

    if isinstance(exc, apsw.NotADBError):
        return f"BAD_DB_PATH: VP_DB_PATH does not point to a SQLite database ({exc})"
    if isinstance(exc, apsw.CantOpenError | apsw.ReadOnlyError | apsw.PermissionsError | apsw.IOError):
        return f"BAD_DB_PATH: SQLite cannot open VP_DB_PATH for writing ({exc}); set VP_DB_PATH to a writable file"
    return None


if __name__ == "__main__":
    sys.exit(main())
