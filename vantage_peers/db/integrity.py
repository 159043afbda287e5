"""A constraint refused a write (UNIQUE, FOREIGN KEY, CHECK, NOT NULL), whichever backend raised it."""

from __future__ import annotations

import sys

import apsw


def constraint_errors() -> tuple[type[BaseException], ...]:
    """The exception classes meaning "a constraint refused the write", for an `except` clause.

    psycopg is looked up only once something imported it (a PostgreSQL database is open): the SQLite
    path never pays for importing the optional driver."""
    pg = sys.modules.get("psycopg")
    return (apsw.ConstraintError, pg.IntegrityError) if pg is not None else (apsw.ConstraintError,)
