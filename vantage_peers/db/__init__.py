"""SQLite storage: connections, transactions and migrations."""

from .busy import BUSY_ERRORS, CallScope, current_scope
from .connection import Connection, Database, Row, dumps, loads
from .migrate import current_version, latest_version, migrate

__all__ = ["BUSY_ERRORS", "CallScope", "Connection", "Database", "Row", "current_scope", "dumps", "loads",
           "migrate", "current_version", "latest_version", "open_database"]


def open_database(settings) -> Database:
    """Open (and migrate) the database named by `settings`."""
    db = Database(settings.db_path, journal_mode=settings.journal_mode, busy_timeout_ms=settings.busy_timeout_ms,
                  search_budget_ms=settings.search_budget_ms)
    migrate(db)
    return db
