"""Storage: connections, transactions and migrations — the SQLite file, or PostgreSQL (postgres.py)."""

from ..core.inline import WouldWait
from .busy import BUSY_ERRORS, CallScope, adopted, current_scope
from .connection import Connection, Database, Row, dumps, loads
from .dialect import is_postgres_url
from .migrate import current_version, latest_version, migrate
from .protocol import ConnectionAPI, DatabaseAPI

__all__ = ["BUSY_ERRORS", "CallScope", "WouldWait", "adopted", "Connection", "ConnectionAPI", "Database", "DatabaseAPI", "Row", "current_scope", "dumps", "loads",
           "migrate", "current_version", "latest_version", "connect", "open_database", "open_target", "table_names"]


def connect(settings, *, busy_timeout_ms: int | None = None) -> DatabaseAPI:
    """The database `settings` name, not migrated: PostgreSQL when VP_DATABASE_URL is set, else the file."""
    busy_ms = settings.busy_timeout_ms if busy_timeout_ms is None else busy_timeout_ms
    if getattr(settings, "database_url", None):
        from .postgres import PgDatabase

        return PgDatabase(settings.database_url, busy_timeout_ms=busy_ms,
                          search_budget_ms=settings.search_budget_ms, pool_size=settings.pg_pool_size)
    return Database(settings.db_path, journal_mode=settings.journal_mode, busy_timeout_ms=busy_ms,
                    search_budget_ms=settings.search_budget_ms)


def table_names(conn: ConnectionAPI) -> list[str]:
    """The database's own tables (no FTS5 shadow or vector tables, no SQLite internals), as the schema
    spells them, on either backend."""
    if conn.backend == "postgres":
        from .postgres import PgConnection

        assert isinstance(conn, PgConnection)
        rows = conn.rows("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
                         "AND table_type = 'BASE TABLE' ORDER BY table_name")
        names = conn.db.names
        return [names.get(r[0], r[0]) for r in rows if r[0] != "vp_schema" and not r[0].endswith(("_fts", "_vec"))]
    rows = conn.rows("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    return [r[0] for r in rows
            if not r[0].startswith("sqlite_") and "_fts" not in r[0] and not r[0].startswith("vec")
            and "_vec" not in r[0]]


def open_target(target: str, *, busy_timeout_ms: int = 5_000) -> DatabaseAPI:
    """A database named by one string, not migrated: a postgresql:// URL or a SQLite file path."""
    if is_postgres_url(target):
        from .postgres import PgDatabase

        return PgDatabase(str(target), busy_timeout_ms=busy_timeout_ms)
    return Database(target, busy_timeout_ms=busy_timeout_ms)


def open_database(settings) -> DatabaseAPI:
    """Open (and migrate) the database named by `settings`."""
    db = connect(settings)
    migrate(db)
    return db

