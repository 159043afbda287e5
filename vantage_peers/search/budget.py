"""A time budget for search SQL: past it, SQLite is interrupted and the search answers what it has.

A keyword search over many matching rows (or huge ones) could hold its read transaction for
minutes: WAL cannot checkpoint behind it, and in delete mode every writer waits. The budget
(`VP_SEARCH_BUDGET_MS`, counted from the call's first search) is enforced by SQLite's progress
handler; the rows read so far are returned and the call's scope is marked, so the app wrapper adds
`truncated: true` to the reply.

On PostgreSQL the statement runs inside a savepoint with `SET LOCAL statement_timeout` set to what
is left of the budget, all sent in one round trip: a cancelled statement is rolled back to the
savepoint (the read transaction goes on), answers no rows, and marks the scope the same way.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import apsw

from ..db import Connection, Row, current_scope
from . import backend

PROGRESS_STEPS = 2_000  # SQLite VM instructions between deadline checks


def query(conn: Connection, sql: str, params: Sequence[Any] = ()) -> list[Row]:
    """`conn.query` under the call's search budget (no budget outside a call scope)."""
    scope = current_scope()
    chosen = backend.of(conn)
    if scope is None or scope.search_budget_ms <= 0 or (chosen.budget_needs_transaction and not conn.in_tx):
        return conn.query(sql, params)
    if scope.search_deadline is None:
        scope.search_deadline = time.monotonic() + scope.search_budget_ms / 1000
    deadline = scope.search_deadline
    if time.monotonic() >= deadline:
        scope.truncated = True
        return []
    return chosen.bounded_query(conn, sql, params, scope, deadline)


def sqlite_query(conn: Any, sql: str, params: Sequence[Any], scope: Any, deadline: float) -> list[Row]:
    """SQLite: the progress handler interrupts the statement at the deadline; the rows read are kept."""
    rows: list[Row] = []
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


def pg_query(conn: Any, sql: str, params: Sequence[Any], scope: Any, deadline: float) -> list[Row]:
    """PostgreSQL: a savepoint and `statement_timeout` around the statement (inside a transaction only)."""
    left_ms = max(1, int((deadline - time.monotonic()) * 1000))
    try:
        # One round trip: the savepoint, the timeout, the query, then rolling back to the savepoint
        # (which also undoes the SET LOCAL: the server's own statement_timeout applies again; the rows
        # already read are kept, a search writes nothing). `plan_cache_mode`: a search statement's
        # best plan depends on its tsquery (a rare word: the GIN index; a common one: a backward scan
        # of the key); psycopg prepares a statement run 5 times, and PostgreSQL's generic plan for it
        # then serves every word alike (a rare word's probe 2 -> 20 ms at 100k rows).
        return conn.query_between(
            [f"SAVEPOINT {_SAVEPOINT}", f"SET LOCAL statement_timeout = {left_ms}",
             "SET LOCAL plan_cache_mode = force_custom_plan"], sql, params,
            [f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}", f"RELEASE SAVEPOINT {_SAVEPOINT}"])
    except Exception as exc:
        conn.script(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}; RELEASE SAVEPOINT {_SAVEPOINT}")
        if getattr(exc, "sqlstate", None) == "57014":  # query_canceled: the timeout fired
            scope.truncated = True
            return []
        raise


_SAVEPOINT = "vp_search_budget"


def timed_out() -> bool:
    """True when the call's search budget has run out (its later searches answer nothing)."""
    scope = current_scope()
    return scope is not None and scope.truncated
