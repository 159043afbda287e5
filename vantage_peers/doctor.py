"""`vantage-peers doctor`: print the settings in force and check them."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from . import __version__
from .pipeline.settings import Settings

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


# (field, variable, when it does something). `None` = always; a module name = once that feature is
# installed (HTTP serving, GitHub, UI markers arrive as their own packages); "embeddings" = only
# with an embedding provider on; "local" = only with the local model. Secrets are shown as set/unset, never printed.
SHOWN_SETTINGS: tuple[tuple[str, str, str | None], ...] = (
    ("db_path", "VP_DB_PATH", None),
    ("database_url", "VP_DATABASE_URL", None),  # issue #25; shown without its password
    ("pg_pool_size", "VP_PG_POOL_SIZE", "psycopg_pool"),
    ("orchestrator", "VP_ORCHESTRATOR", None),
    ("instance_id", "VP_INSTANCE_ID", None),
    ("toolsets", "VP_TOOLSETS", None),
    ("journal_mode", "VP_JOURNAL_MODE", None),
    ("busy_timeout_ms", "VP_BUSY_TIMEOUT_MS", None),
    ("scheduler", "VP_SCHEDULER", None),
    ("tick_seconds", "VP_TICK_SECONDS", None),
    ("embeddings", "VP_EMBEDDINGS", None),
    ("embedding_model", "VP_EMBEDDING_MODEL", "embeddings"),
    ("embedding_dimensions", "VP_EMBEDDING_DIMENSIONS", "embeddings"),
    ("model_host", "VP_MODEL_HOST", "local"),  # #20: the local model shared by a user's processes
    ("embed_model", "VP_EMBED_MODEL", "local"),  # #35: the bundled model or a model folder
    ("openai_api_key", "OPENAI_API_KEY / AI_GATEWAY_API_KEY", "embeddings"),
    ("openai_base_url", "OPENAI_BASE_URL / AI_GATEWAY_BASE_URL", "embeddings"),
    ("max_segment_minutes", "VP_MAX_SEGMENT_MINUTES", None),
    ("presence_interval_seconds", "VP_PRESENCE_INTERVAL_SECONDS", None),
    ("max_delivery_attempts", "VP_MAX_DELIVERY_ATTEMPTS", None),  # #21 delivery (docs/delivery.md)
    ("ack_timeout_seconds", "VP_ACK_TIMEOUT_SECONDS", None),
    ("dead_after_seconds", "VP_DEAD_AFTER_SECONDS", None),
    ("emit_ui_markers", "VP_EMIT_UI_MARKERS", "vantage_peers.ui"),
    ("host", "HOST", "vantage_peers.http"),
    ("port", "PORT", "vantage_peers.http"),
    ("public_base_url", "PUBLIC_BASE_URL", "vantage_peers.http"),
    ("bearer_secret_master", "BEARER_SECRET_MASTER", "vantage_peers.http"),
    ("github_token", "GITHUB_TOKEN", "vantage_peers.domains.github"),
    ("github_api_url", "GITHUB_API_URL", "vantage_peers.domains.github"),
    ("github_webhook_secret", "GITHUB_WEBHOOK_SECRET", "vantage_peers.domains.github"),
)
SECRETS = {"openai_api_key", "bearer_secret_master", "github_token", "github_webhook_secret"}


def settings_shown(settings: Settings) -> list[tuple[str, str]]:
    """(variable, value as printed) for every setting that has an effect in this installation."""
    import importlib.util

    rows = []
    for field, env_name, when in SHOWN_SETTINGS:
        if when == "embeddings" and settings.embeddings != "openai":  # model, key and URL serve openai only
            continue
        if when == "local" and settings.embeddings != "local":  # the model host serves the local model only
            continue
        if when not in (None, "embeddings", "local") and importlib.util.find_spec(when) is None:
            continue
        value = getattr(settings, field, None)
        if field in SECRETS:
            shown = "set" if value else "unset"
        elif field == "database_url" and value:
            from .db.postgres import redacted

            shown = redacted(value)
        elif isinstance(value, tuple):
            shown = ",".join(value)
        elif isinstance(value, bool):
            shown = "on" if value else "off"
        else:
            shown = "—" if value is None else str(value)
        rows.append((env_name, shown))
    return rows


class Report:
    """What `doctor` prints: one `[status] label: detail` line per check, failures counted."""

    def __init__(self, out) -> None:
        self.out = out
        self.failures = 0

    def line(self, status: str, label: str, detail: str = "") -> None:
        self.out.write(f"[{status:>4}] {label}{': ' + detail if detail else ''}\n")

    def fail(self, label: str, detail: str) -> None:
        self.failures += 1
        self.line("FAIL", label, detail)

    def rows(self, label: str, produce: Callable[[], Iterable[tuple[str, str, str]]]) -> None:
        """A domain's (status, label, detail) rows; a FAIL row or an exception counts as a failure."""
        try:
            for status, row_label, detail in produce():
                if status == "FAIL":
                    self.fail(row_label, detail)
                else:
                    self.line(status, row_label, detail)
        except Exception as exc:  # noqa: BLE001 - one domain's broken check must not hide the others
            self.fail(label, str(exc))

    def finish(self) -> int:
        self.out.write("all checks passed\n" if self.failures == 0 else f"{self.failures} check(s) failed\n")
        return 0 if self.failures == 0 else 1


def run_doctor(settings: Settings | None = None, out=None) -> int:
    out = out or sys.stdout
    report = Report(out)
    line, fail = report.line, report.fail

    out.write(f"vantage-peers {__version__} (Python {platform.python_version()}, {platform.system()})\n")
    try:
        settings = settings or Settings.from_env()
    except Exception as exc:  # noqa: BLE001
        fail("settings", str(exc))
        return 1
    out.write("settings in force:\n")
    for env_name, value in settings_shown(settings):
        out.write(f"  {env_name} = {value}\n")

    import apsw

    line("ok", "SQLite", f"{apsw.sqlite_lib_version()} (apsw {apsw.apsw_version()})")

    from .db import Database, migrate

    if settings.database_url:  # issue #25: the checks of the PostgreSQL backend instead of the file's
        db_or_none = _postgres_checks(settings, report)
        if db_or_none is None:
            return 1
        db, version = db_or_none
        return _common_checks(settings, db, version, report)

    path = settings.db_path
    from .db.fileguard import stale_holders

    for pid, what in stale_holders(path):  # #19: a server still writing to a deleted/replaced file
        fail("database file", f"process {pid} holds {what} of {path} (DB_FILE_GONE: it refuses writes); "
             "restart it so it opens the file at the path")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not os.access(path.parent, os.W_OK):
            raise PermissionError(f"{path.parent} is not writable")
        db = Database(path, journal_mode=settings.journal_mode, busy_timeout_ms=settings.busy_timeout_ms)
        version = migrate(db)
        db.write(lambda c: c.execute("INSERT INTO meta (key, value) VALUES ('doctor', 'ok') "
                                     "ON CONFLICT (key) DO UPDATE SET value = excluded.value"))
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

    return _common_checks(settings, db, version, report)


def _postgres_checks(settings: Settings, report: Report):
    """Connect, migrate and write once on PostgreSQL; (db, version), or None after a failure."""
    from .db import connect, migrate

    line, fail = report.line, report.fail

    try:
        db = connect(settings)
        version = migrate(db)
        db.write(lambda c: c.execute("INSERT INTO meta (key, value) VALUES ('doctor', 'ok') "
                                     "ON CONFLICT (key) DO UPDATE SET value = excluded.value"))
        server = db.read(lambda c: c.scalar("SHOW server_version"))
        line("ok", "database", f"PostgreSQL {server} at {db.path} is writable")
    except Exception as exc:  # noqa: BLE001
        fail("database", f"{settings.database_url.split('@')[-1]}: {exc}")
        return None
    if db.vec_version:
        line("ok", "pgvector", str(db.vec_version))
    else:
        fail("pgvector", "the vector extension is not installed on the server; vector search is unavailable")
    line("ok", "pool", f"up to {settings.pg_pool_size} connections per process (VP_PG_POOL_SIZE)")
    report.rows("buffer cache", lambda: [_pg_buffers(db)])
    return db, version


# The vector tables' rows (not their HNSW indexes): what recall's exact rescoring reads at random.
_PG_BUFFERS = ("SELECT current_setting('shared_buffers'), pg_size_bytes(current_setting('shared_buffers')), "
               "coalesce((SELECT sum(pg_relation_size(to_regclass(name))) FROM vectorModels "
               "WHERE to_regclass(name) IS NOT NULL), 0)")


def _pg_buffers(db) -> tuple[str, str, str]:
    """WARN when `shared_buffers` cannot hold the vector tables: each recall's exact rescoring then reads
    rows from the OS (100k memories, 156 MB of vectors: 3.6 ms per KNN at 128 MB, 1.2 ms at 512 MB)."""
    setting, buffers, vectors = db.read(lambda c: c.rows(_PG_BUFFERS))[0]
    size = f"{int(vectors) / 2**20:.0f} MB"
    if int(vectors) > int(buffers):
        return ("WARN", "buffer cache", f"shared_buffers is {setting} and the vector tables hold {size}: recall "
                "reads vectors from disk or the OS cache; raise shared_buffers above that (docs/scale.md)")
    return "ok", "buffer cache", f"shared_buffers {setting} holds the vector tables ({size})"


def _common_checks(settings: Settings, db, version: int, report: Report) -> int:
    from .db import current_version, latest_version

    latest = latest_version()
    if version == latest == current_version(db):
        report.line("ok", "schema version", str(version))
    else:
        report.fail("schema version", f"database at {current_version(db)}, code expects {latest}")

    def model_host():  # #20: mode, socket, the running host's pid
        from .embedding.shared_model import doctor_lines

        return doctor_lines(settings)

    def embeddings():
        from .domains.memory.maintenance import doctor_checks

        return doctor_checks(settings, db, _corpora(settings))

    def http():
        from .http.doctor import doctor_checks

        return doctor_checks(settings)

    def github():
        from .domains.github.doctor import doctor_checks

        return doctor_checks(settings, db)

    def scheduler():
        from .domains.recurring import doctor_lines

        return doctor_lines(settings, db)

    def tools():
        from .server import create_app

        app = create_app(settings)
        app.db.close()
        return [("ok", "tools registered", str(len(app.tools)))]

    for label, produce in (("model host", model_host), ("embeddings", embeddings), ("http", http),
                           ("github", github), ("scheduler", scheduler), ("tools", tools)):
        report.rows(label, produce)
    db.close()
    return report.finish()


def _corpora(settings: Settings) -> list[object]:
    """#20: the embedded corpora, as the domains register them on an app (search/ knows no domain)."""
    from .server import create_app

    app = create_app(settings)
    try:
        return list(app.corpora)
    finally:
        app.db.close()
