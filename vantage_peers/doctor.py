"""`vantage-peers doctor`: print the settings in force and check them."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

from . import __version__
from .settings import Settings

NETWORK_FS = {"nfs", "nfs4", "smbfs", "smb3", "cifs", "fuse", "9p", "afpfs", "webdav", "davfs", "sshfs"}


def filesystem_type(path: Path) -> str | None:
    """The filesystem type holding `path` (Linux /proc/mounts, else `mount` output), or None."""
    target = path.resolve()
    while not target.exists() and target != target.parent:
        target = target.parent
    mounts: list[tuple[str, str]] = []
    try:
        with open("/proc/mounts", encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 3:
                    mounts.append((parts[1].replace("\\040", " "), parts[2]))
    except OSError:
        try:
            out = subprocess.run(["mount"], capture_output=True, text=True, timeout=5).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        for line in out.splitlines():  # macOS: "/dev/disk1 on / (apfs, local, journaled)"
            if " on " in line and "(" in line:
                point = line.split(" on ", 1)[1].split(" (", 1)[0]
                mounts.append((point, line.rsplit("(", 1)[1].split(",")[0].strip(" )")))
    best, kind = "", None
    for point, fstype in mounts:
        if (str(target) == point or str(target).startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, fstype
    return kind


def is_network_fs(kind: str | None) -> bool:
    return kind is not None and (kind.lower() in NETWORK_FS or kind.lower().startswith("fuse"))


def run_doctor(settings: Settings | None = None, out=None) -> int:
    out = out or sys.stdout
    failures = 0

    def line(status: str, label: str, detail: str = "") -> None:
        out.write(f"[{status:>4}] {label}{': ' + detail if detail else ''}\n")

    def fail(label: str, detail: str) -> None:
        nonlocal failures
        failures += 1
        line("FAIL", label, detail)

    out.write(f"vantage-peers {__version__} (Python {platform.python_version()}, {platform.system()})\n")
    try:
        settings = settings or Settings.from_env()
    except Exception as exc:  # noqa: BLE001
        fail("settings", str(exc))
        return 1
    out.write("settings in force:\n")
    shown = settings.model_dump()
    for key in ("openai_api_key", "bearer_secret_master", "github_token", "github_webhook_secret"):
        if shown.get(key):
            shown[key] = "***set***"
    for key, value in shown.items():
        out.write(f"  {key} = {value}\n")

    import apsw

    line("ok", "SQLite", f"{apsw.sqlite_lib_version()} (apsw {apsw.apsw_version()})")

    from .db import Database, current_version, latest_version, migrate

    path = settings.db_path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not os.access(path.parent, os.W_OK):
            raise PermissionError(f"{path.parent} is not writable")
        db = Database(path, journal_mode=settings.journal_mode, busy_timeout_ms=settings.busy_timeout_ms)
        version = migrate(db)
        db.write(lambda c: c.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('doctor', 'ok')"))
        line("ok", "database", f"{path} is writable")
    except Exception as exc:  # noqa: BLE001
        fail("database", f"{path}: {exc}")
        return 1

    conn = db.conn
    if conn.vec_version:
        line("ok", "sqlite-vec", conn.vec_version)
    else:
        fail("sqlite-vec", "the extension did not load; vector search is unavailable")
    mode = conn.scalar("PRAGMA journal_mode")
    if db.journal_warning:  # the file's mode wins over VP_JOURNAL_MODE (db/journal.py)
        line("WARN", "journal mode", db.journal_warning)
    else:
        line("ok", "journal mode", str(mode))

    fstype = filesystem_type(path)
    if is_network_fs(fstype):
        if str(mode).lower() == "wal":
            line("WARN", "filesystem", f"{fstype}: WAL needs shared memory and is unsafe on a network drive; "
                 "set VP_JOURNAL_MODE=delete")
        else:
            line("WARN", "filesystem", f"{fstype} (network drive; journal mode {mode} is the safe choice)")
    else:
        line("ok", "filesystem", fstype or "unknown")

    latest = latest_version()
    if version == latest == current_version(db):
        line("ok", "schema version", str(version))
    else:
        fail("schema version", f"file at {current_version(db)}, code expects {latest}")

    try:
        from .domains.memory.maintenance import doctor_checks

        for status, label, detail in doctor_checks(settings, db):
            if status == "FAIL":
                fail(label, detail)
            else:
                line(status, label, detail)
    except Exception as exc:  # noqa: BLE001
        fail("embeddings", str(exc))

    try:
        from .server import create_app

        app = create_app(settings)
        line("ok", "tools registered", str(len(app.tool_names)))
        app.db.close()
    except Exception as exc:  # noqa: BLE001
        fail("tools", str(exc))
    db.close()
    out.write("all checks passed\n" if failures == 0 else f"{failures} check(s) failed\n")
    return 0 if failures == 0 else 1

