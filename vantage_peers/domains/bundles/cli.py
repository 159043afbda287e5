"""CLI commands `export`, `import`, `backup`, `restore` (cli.py only adds the subparsers and dispatches)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

Handler = Callable[[argparse.Namespace], int]


def _progress(verb: str) -> Callable[[str, int], None]:
    def report(member: str, n: int) -> None:
        print(f"vantage-peers {verb}: {member}: {n} records", file=sys.stderr, flush=True)

    return report


def _print(result: dict[str, Any]) -> None:
    print(json.dumps(result, ensure_ascii=False, indent=2))


def _settings():
    from ...pipeline.settings import Settings

    return Settings.from_env()


def run_export(args: argparse.Namespace) -> int:
    from ...db import open_database
    from .service import export_bundle

    settings = _settings()
    db = open_database(settings)
    out = Path(args.output)
    if not out.parent.is_dir():
        from ...core.errors import InvalidArgument

        raise InvalidArgument(f"the directory of {out} does not exist")
    partial = out.with_name(f".{out.name}.partial-{os.getpid()}")
    try:
        with open(partial, "wb") as fh:
            manifest = export_bundle(db, args.namespace, fh, progress=_progress("export"))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(partial, out)
    finally:
        db.close()
        partial.unlink(missing_ok=True)
    print(f"vantage-peers export: wrote {out} ({out.stat().st_size} bytes)", file=sys.stderr)
    _print({"file": str(out), "bytes": out.stat().st_size, "counts": manifest["counts"]})
    return 0


def run_import(args: argparse.Namespace) -> int:
    from ...core.errors import InvalidArgument
    from ...db import open_database
    from .service import import_bundle, load

    path = Path(args.file)
    if not path.is_file():
        raise InvalidArgument(f"no bundle file at {path}")
    with open(path, "rb") as fh:
        bundle = load(fh, progress=_progress("import"))
    settings = _settings()
    db = open_database(settings)
    try:
        result = import_bundle(db, bundle, args.into, args.mode)
    finally:
        db.close()
    _print(result)
    return 0


def run_backup(args: argparse.Namespace) -> int:
    from .backup import backup, refuse_on_postgres

    settings = _settings()
    refuse_on_postgres(settings, "backup")
    _print(backup(settings.db_path, Path(args.file), force=args.force))
    return 0


def run_restore(args: argparse.Namespace) -> int:
    from .backup import refuse_on_postgres, restore

    settings = _settings()
    refuse_on_postgres(settings, "restore")
    _print(restore(settings.db_path, Path(args.file), journal_mode=settings.journal_mode))
    return 0


def _clean_io(handler: Handler) -> Handler:
    """A missing directory or unreadable file is a one-line `IO_ERROR`, not a traceback."""

    def run(args: argparse.Namespace) -> int:
        from ...core.errors import VantageError

        try:
            return handler(args)
        except OSError as err:
            raise VantageError(f"{err.strerror or err}: {err.filename or ''}".rstrip(": "), code="IO_ERROR") from None

    return run


def add_commands(sub: Any) -> dict[str, Handler]:
    p = sub.add_parser("export", help="write a namespace's OKF bundle (.okf.tar.gz) to a file")
    p.add_argument("--namespace", required=True, help="the namespace to export (exact)")
    p.add_argument("-o", "--output", required=True, help="bundle file to write")
    p = sub.add_parser("import", help="import an OKF bundle file into a namespace (dry-run by default)")
    p.add_argument("file", help="bundle file (.okf.tar.gz)")
    p.add_argument("--into", required=True, help="target namespace")
    p.add_argument("--mode", choices=("dry-run", "merge", "replace"), default="dry-run")
    p = sub.add_parser("backup", help="consistent copy of the live database while other processes keep writing")
    p.add_argument("file", help="backup file to create")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    p = sub.add_parser("restore", help="replace the database with a backup (refused while the database is in use)")
    p.add_argument("file", help="backup file made by `vantage-peers backup`")
    handlers = {"export": run_export, "import": run_import, "backup": run_backup, "restore": run_restore}
    return {name: _clean_io(fn) for name, fn in handlers.items()}
