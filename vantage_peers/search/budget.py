"""A time budget for search SQL: past it, SQLite is interrupted and the search answers what it has.

A keyword search over many matching rows (or huge ones) could hold its read transaction for
minutes: WAL cannot checkpoint behind it, and in delete mode every writer waits. The budget
(`VP_SEARCH_BUDGET_MS`, counted from the call's first search) is enforced by SQLite's progress
handler; the rows read so far are returned and the call's scope is marked, so the app wrapper adds
`truncated: true` to the reply.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import apsw

from ..db import Connection, Row, current_scope

PROGRESS_STEPS = 2_000  # SQLite VM instructions between deadline checks


def query(conn: Connection, sql: str, params: Sequence[Any] = ()) -> list[Row]:
    """`conn.query` under the call's search budget (no budget outside a call scope)."""
    scope = current_scope()
    if scope is None or scope.search_budget_ms <= 0:
        return conn.query(sql, params)
    if scope.search_deadline is None:
        scope.search_deadline = time.monotonic() + scope.search_budget_ms / 1000
    deadline = scope.search_deadline
    rows: list[Row] = []
    if time.monotonic() >= deadline:
        scope.truncated = True
        return rows
    conn.raw.set_progress_handler(lambda: time.monotonic() >= deadline, PROGRESS_STEPS)
    try:
        cur = conn.raw.cursor()
        cur.execute(sql, params)
        try:
            names = [d[0] for d in cur.get_description()]
        except apsw.ExecutionCompleteError:
            return rows
        for row in cur:
            rows.append(dict(zip(names, row, strict=True)))
    except apsw.InterruptError:
        scope.truncated = True
    finally:
        conn.raw.set_progress_handler(None)
    return rows
