"""`vantage-peers migrate-db`: copy (db/transfer.py), verify (db/transfer_check.py), print the table."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any, TextIO

from .transfer import (
    BATCH,
    TransferError,
    _identity,
    copy,
    describe,
    open_side,
    prepare,
    schema_tables,
)
from .transfer_check import format_checks, verify


def run(source_where: str, target_where: str, *, force: bool = False, verify_only: bool = False,
        batch: int = BATCH, out: TextIO | None = None, err: TextIO | None = None,
        opener: Callable[..., Any] = open_side) -> int:
    """The command: copy (unless `verify_only`), verify, print the table. 0 when every table matches, 1 if not."""
    out, err = out or sys.stdout, err or sys.stderr
    if batch < 1:
        raise TransferError(f"--batch-size must be at least 1, got {batch}")
    if _identity(source_where) == _identity(target_where):
        raise TransferError("--from and --to name the same database")
    source = target = None
    stage = "opening the source"
    try:
        source = opener(source_where, role="source")
        stage = "opening the target"
        target = opener(target_where, role="target")
        stage = "the copy"
        specs = schema_tables()
        if not verify_only:
            prepare(source, target, err=err)
            err.write(f"migrate-db: copying {describe(source_where)} -> {describe(target_where)}\n")
            result = copy(source, target, force=force, batch=batch, err=err, specs=specs)
            for name, n in result.requeued.items():
                err.write(f"migrate-db: {name}: not copied; the target queued {n} rows for embedding "
                          "(vectors are re-made by the target's embedding worker or `vantage-peers reindex`)\n")
            err.write("migrate-db: full-text indexes were rebuilt by the target from the copied rows\n")
        err.write("migrate-db: verifying counts and checksums\n")
        stage = "the verification"
        checks = verify(source, target, batch=batch, specs=specs)
        out.write(format_checks(checks) + "\n")
        out.flush()
        bad = [c.name for c in checks if not c.ok]
        if bad:
            err.write(f"migrate-db: {len(bad)} table(s) differ: {', '.join(bad)}\n")
            return 1
        err.write(f"migrate-db: all {len(checks)} tables match\n")
        return 0
    except Exception as exc:
        if type(exc).__module__.split(".")[0] in ("psycopg", "psycopg_pool", "apsw"):  # the database's own words
            raise TransferError(f"{stage} failed: {type(exc).__name__}: {str(exc).strip()}; nothing was "
                                "committed to the target") from exc
        raise
    finally:
        for db in (source, target):
            if db is not None:
                with contextlib.suppress(Exception):
                    db.close()
