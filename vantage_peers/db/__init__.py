"""Storage: connections, transactions and migrations — the SQLite file, or PostgreSQL (postgres.py)."""

from .busy import BUSY_ERRORS, CallScope, current_scope
from .connection import Connection, Database, Row, dumps, loads
from .migrate import current_version, latest_version, migrate

__all__ = ["BUSY_ERRORS", "CallScope", "Connection", "Database", "Row", "current_scope", "dumps", "loads",
           "migrate", "current_version", "latest_version", "connect", "open_database", "open_target"]


def connect(settings, *, busy_timeout_ms: int | None = None) -> Database:
    """The database `settings` name, not migrated: PostgreSQL when VP_DATABASE_URL is set, else the file."""
    busy_ms = settings.busy_timeout_ms if busy_timeout_ms is None else busy_timeout_ms
    if getattr(settings, "database_url", None):
        from .postgres import PgDatabase

        return PgDatabase(settings.database_url, busy_timeout_ms=busy_ms,  # type: ignore[return-value]
                          search_budget_ms=settings.search_budget_ms, pool_size=settings.pg_pool_size)
    return Database(settings.db_path, journal_mode=settings.journal_mode, busy_timeout_ms=busy_ms,
                    search_budget_ms=settings.search_budget_ms)


def open_target(target: str, *, busy_timeout_ms: int = 5_000) -> Database:
    """A database named by one string, not migrated: a postgresql:// URL or a SQLite file path."""
    if str(target).startswith(("postgresql://", "postgres://")):
        from .postgres import PgDatabase

        return PgDatabase(str(target), busy_timeout_ms=busy_timeout_ms)  # type: ignore[return-value]
    return Database(target, busy_timeout_ms=busy_timeout_ms)


def open_database(settings) -> Database:
    """Open (and migrate) the database named by `settings`."""
    db = connect(settings)
    migrate(db)
    return db

