"""The one keyword (FTS5 + BM25) query every searchable table uses.

A document table `table` (rows keyed by `seq`) has an external-content FTS5 index `fts` whose
rowid is that `seq`. `keyword_rows` joins the two, filters, ranks by BM25 (lower is better, ties
by id) and, when asked, adds a Python-computed `snippet` (search/snippets.py: bounded cost) for
one column. It runs under the call's search budget (search/budget.py). Table and column names
come from code, never from callers; the MATCH expression is built by `fts.fts_query`, which makes
any user text safe. This module knows no domain: each store passes its table, weights and filters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..db import Connection, Row
from . import backend, budget, pg_fts
from .fts import ranked
from .snippets import add_snippets


def _ident(name: str) -> str:
    if not name.isidentifier():  # defensive: names are code constants, never user text
        raise ValueError(f"not a table or column name: {name!r}")
    return name


def keyword_rows(
    conn: Connection,
    *,
    fts: str,
    table: str,
    match: str,
    limit: int,
    where: Sequence[str] = (),
    params: Sequence[Any] = (),
    inner_where: Sequence[str] = (),
    inner_params: Sequence[Any] = (),
    weights: Sequence[float] = (),
    columns: str = "d.*",
    snippet: str | None = None,
) -> list[Row]:
    """Rows of `table` (aliased `d`) matching `match`, best first, each with `rank` (and `snippet`).

    `where` clauses refer to the document as `d` (`d.topic = ?`). `inner_where` clauses are
    applied to `table` alone in a subquery, for column names the FTS table also has (a bare
    `title` would be ambiguous next to it). `weights` are the per-column BM25 weights.
    """
    fts, table = _ident(fts), _ident(table)
    source, source_args = table, list(inner_params)
    if inner_where:
        source = f"(SELECT * FROM {table} WHERE {' AND '.join(f'({c})' for c in inner_where)})"
    rows = backend.of(conn).keyword_rows(conn, fts=fts, table=table, match=match, limit=limit, where=where,
                                         params=params, source=source, source_args=source_args,
                                         inner_where=inner_where, weights=weights, columns=columns)
    if snippet is not None:
        add_snippets(rows, match, snippet)
    return rows


def sqlite_rows(conn: Connection, *, fts: str, table: str, match: str, limit: int, where: Sequence[str],
                params: Sequence[Any], source: str, source_args: Sequence[Any], inner_where: Sequence[str],
                weights: Sequence[float], columns: str) -> list[Row]:
    """SQLite: the FTS5 index joined to its table, ranked by `bm25()` under the search budget."""
    bm25 = f"bm25({fts}{''.join(f', {float(w)!r}' for w in weights)})"
    clauses = [f"{fts} MATCH ?", *where]
    return budget.query(
        conn,
        f"SELECT {columns}, {bm25} AS rank FROM {fts} JOIN {source} d ON d.seq = {fts}.rowid "
        f"WHERE {' AND '.join(f'({c})' for c in clauses)} ORDER BY rank, d.id LIMIT ?",
        [*source_args, match, *params, limit],
    )


def pg_rows(conn: Connection, *, fts: str, table: str, match: str, limit: int, where: Sequence[str],
            params: Sequence[Any], source: str, source_args: Sequence[Any], inner_where: Sequence[str],
            weights: Sequence[float], columns: str) -> list[Row]:
    """PostgreSQL: the tsvector side table, BM25 computed in search/pg_fts.py (or a substring search)."""
    declared = pg_fts.columns_of(conn, fts)
    if declared and declared[0] == "trigram":
        clauses = [*inner_where, *where]  # no FTS table is joined: bare column names are not ambiguous
        return pg_fts.trigram_rows(conn, table=table, text_columns=declared[1:], match=match, limit=limit,
                                   where=clauses, params=[*source_args, *params], weights=weights, columns=columns)
    return pg_fts.keyword_rows(conn, fts=fts, table=table, match=match, limit=limit, where=where, params=params,
                               source=source, source_args=source_args, weights=weights, columns=columns)


def keyword_docs(conn: Connection, *, shape: Callable[[dict[str, Any]], dict[str, Any]], **query: Any,
                 ) -> list[dict[str, Any]]:
    """`keyword_rows` as documents (`shape(row)`) carrying `score` (and `snippet`)."""
    return ranked(keyword_rows(conn, **query), shape)
