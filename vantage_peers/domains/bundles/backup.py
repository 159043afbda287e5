"""`vantage-peers backup FILE` and `restore FILE`: whole-database copies with SQLite's backup API.

Backup copies every page in one step, inside one read transaction of the live database, so the
copy is the database as of one instant — every transaction committed before the backup started is
in it — while other processes keep writing (WAL readers do not block writers). The copy is
written beside FILE, checked with `PRAGMA integrity_check`, switched to a self-contained
rollback-journal file, and only then renamed into place.

Restore refuses to overwrite a database that another process has open: in WAL mode it tries to
leave WAL (SQLite allows that only to the sole connection); in rollback-journal mode it can only
see open transactions, so stop the servers first. The replaced file is kept beside it.

Both copy the SQLite file: on PostgreSQL (`VP_DATABASE_URL`) they refuse with `UNSUPPORTED_BACKEND`
and name the tools that do the job there (`pg_dump` / `pg_restore`, or `migrate-db` to a file).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

import apsw

from ...core.errors import VantageError
from ...db.migrate import latest_version

BUSY_MS = 10_000


class BackupError(VantageError):
    code = "BACKUP_FAILED"


def refuse_on_postgres(settings: Any, verb: str) -> None:
    """`backup` and `restore` copy a SQLite file; a PostgreSQL database is backed up by its own tools."""
    if not getattr(settings, "database_url", None):
        return
    how = ("pg_dump -Fc -f vp.dump \"$VP_DATABASE_URL\" (and pg_restore --clean -d URL vp.dump to restore)"
           if verb == "backup" else "pg_restore --clean -d \"$VP_DATABASE_URL\" vp.dump (a pg_dump -Fc archive)")
    raise BackupError(f"{verb} copies the SQLite file, but VP_DATABASE_URL points to PostgreSQL: use {how}, "
                      "or copy everything into a SQLite file with `vantage-peers migrate-db --from URL --to FILE` "
                      "and back with `migrate-db --from FILE --to URL`", code="UNSUPPORTED_BACKEND")


def _connect(path: Path, *, busy_ms: int = BUSY_MS, readonly: bool = False) -> apsw.Connection:
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    conn = apsw.Connection(str(path), flags=flags)
    conn.set_busy_timeout(busy_ms)
    return conn


def _copy(src: apsw.Connection, dst: apsw.Connection) -> int:
    """Every page from src to dst in one step (one consistent snapshot); returns the page count."""
    with dst.backup("main", src, "main") as job:
        job.step(-1)
        return job.page_count


def _fsync(path: Path) -> None:
    fd = os.open(str(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _integrity(conn: apsw.Connection) -> str:
    rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    return "ok" if rows == ["ok"] else "; ".join(str(r) for r in rows[:5])


def backup(db_path: Path, dest: Path, *, force: bool = False) -> dict[str, Any]:
    if not db_path.is_file():
        raise BackupError(f"no database at {db_path} (set VP_DB_PATH)", code="NOT_FOUND")
    dest = dest.expanduser()
    if dest.resolve() == db_path.resolve():
        raise BackupError("the backup file must not be the live database", code="INVALID_ARGUMENT")
    if dest.exists() and not force:
        raise BackupError(f"{dest} already exists; choose a new file or pass --force", code="BACKUP_EXISTS")
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    started = time.time()
    src = _connect(db_path)
    try:
        partial.unlink(missing_ok=True)
        dst = _connect(partial)
        try:
            pages = _copy(src, dst)
            dst.execute("PRAGMA journal_mode=DELETE")  # a single self-contained file, no -wal beside it
            check = _integrity(dst)
            version = dst.execute("PRAGMA user_version").fetchall()[0][0]
        finally:
            dst.close()
        if check != "ok":
            raise BackupError(f"the copy failed integrity_check: {check}", code="INTEGRITY_FAILED")
        _fsync(partial)
        os.replace(partial, dest)
    finally:
        src.close()
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
    return {"backup": str(dest), "bytes": dest.stat().st_size, "pages": pages, "integrity": "ok",
            "schemaVersion": version, "seconds": round(time.time() - started, 3)}


def _check_source(path: Path) -> int:
    if not path.is_file():
        raise BackupError(f"no backup file at {path}", code="NOT_FOUND")
    try:
        conn = _connect(path, readonly=True)
    except apsw.Error as err:
        raise BackupError(f"{path} cannot be opened as SQLite: {err}", code="NOT_A_DATABASE") from None
    try:
        try:
            check = _integrity(conn)
            version = conn.execute("PRAGMA user_version").fetchall()[0][0]
            has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchall()
        except apsw.Error as err:
            raise BackupError(f"{path} is not a SQLite database: {err}", code="NOT_A_DATABASE") from None
    finally:
        conn.close()
    if check != "ok":
        raise BackupError(f"{path} failed integrity_check: {check}", code="INTEGRITY_FAILED")
    if version < 1 or not has_meta:
        raise BackupError(f"{path} is not a vantage-peers database", code="NOT_A_DATABASE")
    if version > latest_version():
        raise BackupError(f"{path} has schema version {version}, newer than this vantage-peers "
                          f"({latest_version()}); upgrade vantage-peers first", code="NOT_A_DATABASE")
    return version


def _claim(conn: apsw.Connection, db_path: Path) -> str:
    """Make sure no other connection uses the target; returns its journal mode before the claim."""
    in_use = BackupError(f"{db_path} is in use by another process (a running vantage-peers server?); "
                         "stop it and run restore again", code="DB_IN_USE")
    try:
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("COMMIT")
        mode = conn.execute("PRAGMA journal_mode").fetchall()[0][0].lower()
        if mode == "wal" and conn.execute("PRAGMA journal_mode=DELETE").fetchall()[0][0].lower() == "wal":
            raise in_use
    except apsw.BusyError:
        raise in_use from None
    return mode


def restore(db_path: Path, source: Path, *, journal_mode: str = "wal") -> dict[str, Any]:
    source = source.expanduser()
    if db_path.exists() and source.resolve() == db_path.resolve():
        raise BackupError("the backup file is the live database itself", code="INVALID_ARGUMENT")
    version = _check_source(source)
    db_path.parent.mkdir(parents=True, exist_ok=True)
    kept = None
    target = _connect(db_path, busy_ms=200)
    try:
        if db_path.stat().st_size > 0:
            _claim(target, db_path)
            kept = db_path.with_name(f"{db_path.name}.before-restore-{time.strftime('%Y%m%d-%H%M%S')}")
            safety = _connect(kept)
            try:
                _copy(target, safety)
                safety.execute("PRAGMA journal_mode=DELETE")
            finally:
                safety.close()
        src = _connect(source, readonly=True)
        try:
            pages = _copy(src, target)
        finally:
            src.close()
        target.execute(f"PRAGMA journal_mode={journal_mode}")
        check = _integrity(target)
    finally:
        target.close()
    return {"restored": str(db_path), "from": str(source), "pages": pages, "integrity": check,
            "schemaVersion": version, "previous": str(kept) if kept else None}
