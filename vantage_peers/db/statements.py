"""What both backends' connections do the same way through their driver's `raw.execute`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


class RawStatements:
    """Migrations' scripts and savepoints: the SQL is the same on SQLite and PostgreSQL."""

    raw: Any

    def script(self, sql: str) -> None:
        """Several statements run as written (migrations)."""
        self.raw.execute(sql)

    @contextlib.contextmanager
    def savepoint(self, name: str) -> Iterator[None]:
        """A nested transaction: undone alone on an exception, kept with the outer one otherwise."""
        self.raw.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            self.raw.execute(f"ROLLBACK TO SAVEPOINT {name}")
            self.raw.execute(f"RELEASE SAVEPOINT {name}")
            raise
        self.raw.execute(f"RELEASE SAVEPOINT {name}")
