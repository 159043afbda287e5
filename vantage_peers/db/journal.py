"""The journal mode belongs to the file, not to the process.

The process that creates the file sets `VP_JOURNAL_MODE`; a later process adopts the file's mode
(WAL is persistent in the file header; the rollback modes delete/truncate/persist are compatible
with each other) and warns when its own setting differs. A file in use is never converted: a
WAL-mode server turning a delete-mode file into WAL is unsafe on the network drive delete mode
exists for, and the other order would fail on a file other processes hold open.
"""

from __future__ import annotations

import sys
from pathlib import Path

import apsw

ROLLBACK = ("delete", "truncate", "persist")


def apply(raw: apsw.Connection, requested: str) -> str:
    """Set or adopt the journal mode on a fresh connection; returns the mode in force."""
    requested = requested.lower()
    current = str(raw.execute("PRAGMA journal_mode").fetchall()[0][0]).lower()
    if current == "memory":  # ":memory:" databases
        return current
    empty = raw.execute("PRAGMA page_count").fetchall()[0][0] == 0
    # A new file takes our mode; between rollback modes the choice is per connection and safe.
    if requested != current and (empty or (requested in ROLLBACK and current in ROLLBACK)):
        current = str(raw.execute(f"PRAGMA journal_mode={requested}").fetchall()[0][0]).lower()
    return current


def mismatch_warning(requested: str, effective: str, path: Path) -> str | None:
    """A one-line warning when the file's mode is not the one this process was configured with."""
    requested, effective = requested.lower(), effective.lower()
    if (requested == "wal") == (effective == "wal"):
        return None
    return (f"VP_JOURNAL_MODE={requested} but {path} is in {effective} mode (set by the process "
            f"that created it); using {effective}. Convert it only with every server stopped "
            f"(sqlite3 {path.name} 'PRAGMA journal_mode={requested}') or set VP_JOURNAL_MODE={effective}")


def warn(message: str) -> None:
    print(f"vantage-peers: warning: journal mode: {message}", file=sys.stderr, flush=True)
