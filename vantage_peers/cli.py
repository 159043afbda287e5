"""`vantage-peers`: the stdio MCP server (default) and its maintenance commands."""

from __future__ import annotations

import argparse
import sys

from . import __version__


def _run_stdio() -> int:
    from .server import create_app
    from .settings import Settings

    app = create_app(Settings.from_env())
    scheduler = None
    if app.settings.scheduler:
        from .scheduler import Scheduler

        scheduler = Scheduler(app)
        scheduler.start()
    try:
        import anyio

        from .transport import serve_stdio

        anyio.run(serve_stdio, app.mcp)  # our transport answers every line, even unparseable ones
    finally:
        if scheduler is not None:
            scheduler.stop()
        app.db.close()
    return 0


def _reindex() -> int:
    from .db import open_database
    from .domains.memory.maintenance import reindex
    from .settings import Settings

    settings = Settings.from_env()
    db = open_database(settings)
    try:
        return reindex(settings, db)
    finally:
        db.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="vantage-peers",
        description="Local MCP server on one SQLite file. With no command it serves MCP over stdio.",
    )
    parser.add_argument("--version", action="version", version=f"vantage-peers {__version__}")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("doctor", help="print the settings in force and check them; exits non-zero on a failed check")
    sub.add_parser("reindex", help="re-embed every memory and fix pattern with the configured model (progress on stderr)")
    args = parser.parse_args(argv)
    try:
        if args.command == "doctor":
            from .doctor import run_doctor

            return run_doctor()
        if args.command == "reindex":
            return _reindex()
        return _run_stdio()
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - a clean one-line error beats a traceback on the CLI
        from .errors import VantageError

        if isinstance(exc, VantageError):
            print(f"vantage-peers: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
