"""Keyword candidates with a bounded cost: a very common word is ranked over its newest rows only.

BM25 ranks every row that matches any query word, so an any-word query holding a word found in most
rows (at 100k memories: ≈70 ms on SQLite, ≈125 ms on PostgreSQL) costs as much as the table. Here
each query word is probed first — its newest COMMON_ROWS + 1 matching rows, newest first, which both
backends answer without reading the rest (FTS5's doclist read backwards; an index scan on `seq`) —
and the ranking is split:
- the *rare* words (at most COMMON_ROWS rows each) are ranked by BM25 over all their rows, as before;
- the whole query is ranked by BM25 over the *window*: rows at least as new as the newest
  COMMON_ROWS rows of the most common word (so at most COMMON_ROWS rows of each common word).
A row found by both keeps the whole query's score; a row older than the window keeps its rare words'
score (a lower bound: BM25 adds over words). When no word is common the query runs unchanged, so
the ranking of any collection where no word matches more than COMMON_ROWS rows (shared/ir/'s
Cranfield, CISI, LoCoMo) is exactly what it was. A memory matching only common words and older
than the window is left to the vector ranker.

`dense` answers a question of the same kind for a scope's token (memory/search.py `_token_pays`):
do the scope's newest COMMON_ROWS rows fill most of the key range they span?
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from . import backend, pg_fts

COMMON_ROWS = 2_000  # a word matching more rows than this is ranked over its newest rows only
DENSE_SHARE = 0.75  # a scope with this share of the newest rows is "dense" (`dense`)


def _sqlite_floors(conn: Any, *, fts: str, matches: Sequence[str], rows: int) -> list[int | None]:
    out: list[int | None] = []
    for match in matches:
        seqs = [int(r[0]) for r in conn.raw.execute(
            f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? ORDER BY rowid DESC LIMIT ?", (match, rows + 1)).fetchall()]
        out.append(seqs[rows - 1] if len(seqs) > rows else None)
    return out


# Per backend: the probe — per MATCH expression, the seq of its `rows`-th newest row when more than
# `rows` match (FTS5: one doclist read backwards per word; PostgreSQL: every word in one statement,
# search/pg_fts.py) — and the clause keeping rows at least as new as a seq (`?`) in the form each can
# use (FTS5 seeks its doclists to a rowid bound; PostgreSQL scans the side table's key from it).
_FLOORS: dict[str, Callable[..., list[int | None]]] = {"sqlite": _sqlite_floors, "postgres": pg_fts.floors}
_WINDOW = {"sqlite": "{fts}.rowid >= ?", "postgres": pg_fts.WINDOW}


def _sqlite_newest(conn: Any, fts: str) -> int | None:
    row = conn.raw.execute(f"SELECT rowid FROM {fts} ORDER BY rowid DESC LIMIT 1").fetchall()
    return int(row[0][0]) if row else None


_NEWEST: dict[str, Callable[[Any, str], int | None]] = {"sqlite": _sqlite_newest,
                                                        "postgres": lambda conn, fts: pg_fts.span(conn, fts)[1]}


def dense(conn: Any, *, fts: str, match: str) -> bool:
    """Do the rows of `match` (a scope's token) fill at least DENSE_SHARE of the key range their newest
    COMMON_ROWS rows span — does the scope hold most of the table's newest rows? False for a scope of
    at most COMMON_ROWS rows, or in a table whose newest key is below COMMON_ROWS. One read of the newest
    key, then one probe like `split`'s."""
    name = backend.of(conn).name
    newest = _NEWEST[name](conn, fts)
    if newest is None or newest < COMMON_ROWS:  # keys from 1: fewer rows than that in the whole table
        return False
    floor = _FLOORS[name](conn, fts=fts, matches=[match], rows=COMMON_ROWS)[0]
    return floor is not None and DENSE_SHARE * (newest - floor + 1) <= COMMON_ROWS


def window_clause(conn: Any, fts: str) -> str:
    return _WINDOW[backend.of(conn).name].format(fts=fts)


def split(conn: Any, *, fts: str, terms: Sequence[str], match_of: Callable[[Sequence[str]], str],
          ) -> tuple[list[str], int | None]:
    """(rare terms, lowest seq of the window) — the window is None when no term is common."""
    found = _FLOORS[backend.of(conn).name](conn, fts=fts, matches=[match_of([term]) for term in terms],
                                           rows=COMMON_ROWS)
    rare = [term for term, floor in zip(terms, found, strict=True) if floor is None]
    common = [floor for floor in found if floor is not None]
    # The tightest window: the most common word keeps COMMON_ROWS rows in it.
    return rare, max(common) if common else None


def merge(whole: Sequence[dict[str, Any]], rare: Sequence[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """Rows by `rank` (lower is better), a row of both lists with the whole query's rank, at most `limit`."""
    best: dict[int, dict[str, Any]] = {row["seq"]: row for row in rare}
    best.update({row["seq"]: row for row in whole})
    return sorted(best.values(), key=lambda row: (row["rank"], row["seq"]))[:limit]
