"""SQLite storage: connections, transactions and migrations."""

from .connection import Connection, Database, Row, dumps, loads
from .migrate import current_version, latest_version, migrate

__all__ = ["Connection", "Database", "Row", "dumps", "loads", "migrate", "current_version", "latest_version"]


def open_database(settings) -> Database:
    """Open (and migrate) the database named by `settings`."""
    db = Database(settings.db_path, journal_mode=settings.journal_mode, busy_timeout_ms=settings.busy_timeout_ms)
    migrate(db)
    return db
