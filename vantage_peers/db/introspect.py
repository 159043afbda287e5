"""What a table looks like, asked the same way on both backends (SQLite's `pragma_table_info` has no
PostgreSQL spelling, and PostgreSQL folds unquoted names to lower case)."""

from __future__ import annotations

from typing import Any


def table_columns(conn: Any, table: str) -> set[str]:
    """The column names of `table` as the schema spells them (camelCase kept); empty when it does not exist."""
    if getattr(conn, "backend", "sqlite") == "postgres":
        names = conn.db.names  # lower-case -> as the PostgreSQL schema file spells it
        rows = conn.rows("SELECT column_name FROM information_schema.columns "
                         "WHERE table_schema = current_schema() AND table_name = lower(?)", (table,))
        return {names.get(r[0], r[0]) for r in rows}
    return {r[0] for r in conn.rows("SELECT name FROM pragma_table_info(?)", (table,))}
