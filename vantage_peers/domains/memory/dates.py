"""Date-aware matching for recall / hybrid_search (#20).

Two signals, both bonuses on the fused score of the head of the candidate list (search/temporal.py
says what counts as a date):
- A question asking *when* ("When did Ana deploy the cache?") favours candidates that say when
  something happened ("… deployed it yesterday", "… in March"): the words it shares with the
  question find the event, the time expression is the answer. +WHEN_BONUS.
- A query naming a period ("what did we decide yesterday", "notes from last week", "in June")
  favours memories written in that period (`createdAt`). +WINDOW_BONUS.
Bonuses are in the fused score's units (weighted z-scores, search/fusion.py), so they reorder
close candidates and never lift a poor match over a clear one. Measured on the four development
collections (benchmarks/retrieval.py, docs/recall.md).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from ...db import Connection
from ...db.dialect import among
from ...search.temporal import asks_when, mentions_time, window

WHEN_BONUS = 1.0  # 0.15 / 0.6 / 1.0 / 1.5 measured: 1.0 and 1.5 best on LoCoMo-dev, nothing moves elsewhere
WINDOW_BONUS = 0.3
DATE_DEPTH = 50  # only the head of the fused list is read (bounded cost)


def date_bonus(conn: Connection, query: str, now: int, scores: Mapping[Hashable, float]) -> dict[Hashable, float]:
    """Bonus per candidate of the head for the date signals the query carries; {} when none."""
    when = asks_when(query)
    span = window(query, now)
    if not scores or (not when and span is None):
        return {}
    head = sorted(scores, key=lambda k: -scores[k])[:DATE_DEPTH]
    picked, keys = among(conn.backend, "seq", head)  # type: ignore[arg-type]
    # conn.rows, not conn.raw: the same call on both backends (psycopg's raw cursor takes no `?`).
    rows = conn.rows(f"SELECT seq, content, createdAt FROM memories WHERE {picked}", keys)
    bonus: dict[Hashable, float] = {}
    for seq, content, created in rows:
        extra = 0.0
        if when and mentions_time(str(content or "")):
            extra += WHEN_BONUS
        if span is not None and isinstance(created, int) and span[0] <= created < span[1]:
            extra += WINDOW_BONUS
        if extra:
            bonus[seq] = extra
    return bonus
