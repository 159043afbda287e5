"""Storage faults as codes that tell the agent what to do (issue #19).

SQLite reports a full disk, a read-only file and an I/O failure as apsw exceptions that used to
reach the agent as `INTERNAL_ERROR (FullError)` — "retry, and report it", the wrong advice. The
one error ladder (calls.ladder) asks `storage_error(exc, db)` first:

- `STORAGE_FULL`: the disk (or quota) holding the database is full — free space, nothing was saved;
- `STORAGE_READ_ONLY`: the file, its WAL/-shm, or the filesystem is read-only (chmod, chattr +i,
  a read-only remount) — make them writable again;
- `STORAGE_IO`: any other I/O failure, with the path and the operating system's error.

The whole cause chain is looked at (a tool may wrap the apsw error). None means "not a storage
fault": the ladder goes on as before.
"""

from __future__ import annotations

import errno
import os
from typing import Any

import apsw

from ..core.errors import VantageError

FULL_ERRNOS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG}
READ_ONLY_ERRNOS = {errno.EROFS, errno.EPERM, errno.EACCES}


class StorageFull(VantageError):
    code = "STORAGE_FULL"


class StorageReadOnly(VantageError):
    code = "STORAGE_READ_ONLY"


class StorageIO(VantageError):
    code = "STORAGE_IO"


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and len(seen) < 8 and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return seen


def _system_errno(db: Any) -> int:
    """The OS error behind the last SQLite failure on this thread's connection (0 when unknown)."""
    try:
        holder = getattr(db._local, "holder", None)  # never open a connection just to ask
        return int(holder.conn.raw.system_errno) if holder is not None else 0
    except Exception:  # noqa: BLE001 - best effort detail for a message
        return 0


def _os_error(number: int) -> str:
    return f"{errno.errorcode.get(number, number)} {os.strerror(number)}" if number else "no OS error reported"


def _extended(exc: BaseException) -> str:
    code = getattr(exc, "extendedresult", None)
    if code is None:
        return type(exc).__name__
    return str(apsw.mapping_extended_result_codes.get(code, code))


def storage_error(exc: BaseException, db: Any = None) -> VantageError | None:
    """The coded error for a storage fault anywhere in `exc`'s cause chain, else None."""
    path = getattr(db, "path", None) or "the database file"
    for item in _chain(exc):
        if isinstance(item, VantageError):
            return None
        if type(item).__module__.startswith(("psycopg", "psycopg_pool")) and type(item).__name__ in (
                "OperationalError", "InterfaceError"):  # PostgreSQL (db/postgres.py): the server went away
            return StorageIO(f"the PostgreSQL server at {path} could not be reached or dropped the connection "
                             f"({str(item).strip().splitlines()[0][:200]}); check that it runs, then call again")
        number = _system_errno(db) if isinstance(item, apsw.Error) else getattr(item, "errno", 0) or 0
        if isinstance(item, apsw.FullError) or (isinstance(item, OSError) and number in FULL_ERRNOS):
            return StorageFull(f"the disk holding {path} is full ({_os_error(number or errno.ENOSPC)}); "
                               "nothing was saved — free some space, then call again")
        if (isinstance(item, apsw.ReadOnlyError | apsw.PermissionsError)
                or (isinstance(item, apsw.IOError | apsw.CantOpenError | OSError) and number in READ_ONLY_ERRNOS)):
            return StorageReadOnly(f"{path} (or its -wal/-shm files, or their filesystem) is read-only "
                                   f"({_extended(item)}, {_os_error(number)}); nothing was saved — make the files "
                                   "and their folder writable again (chmod, chattr -i, remount), then call again")
        if isinstance(item, apsw.IOError | apsw.CantOpenError) or (isinstance(item, OSError)
                                                                   and not isinstance(item, ConnectionError)):
            return StorageIO(f"reading or writing {path} failed ({_extended(item)}, {_os_error(number)}); "
                             "check the disk and the file, then call again")
    return None
