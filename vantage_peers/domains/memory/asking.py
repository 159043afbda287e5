"""A memory that only asks is not the answer to a question (#20), a penalty on the fused score.

When the query is a question, candidates of the head that are themselves short questions
(search/asking.py) lose ASKS_PENALTY fused z-units (search/fusion.py): they reorder against close
candidates and never sink a clear match. They still lend to the memory after them through the
session context (context.py computes its share on the scores before this penalty), so the reply
to a question that matches keeps that lift. Measured on the four development collections
(benchmarks/retrieval.py, docs/recall.md "Questions are not answers").
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from ...db import Connection
from ...search.asking import is_question, only_asks
from .context import CONTEXT_DEPTH, neighbours

ASKS_PENALTY = 0.6  # 0.3 / 0.6 / 1.0 measured: LoCoMo-dev R@5 rises with it, nothing else moves
ASK_LEND = 0.0
ASKS_DEPTH = 50  # only the head of the fused list is read (bounded cost)


def asking_penalty(conn: Connection, query: str, scores: Mapping[Hashable, float]) -> dict[Hashable, float]:
    """Negative bonus per head candidate that only asks; {} when the query is not a question."""
    if not scores or ASKS_PENALTY <= 0 or not is_question(query):
        return {}
    head = sorted(scores, key=lambda k: -scores[k])[:ASKS_DEPTH]
    marks = ",".join("?" for _ in head)
    rows = conn.rows(f"SELECT seq, content FROM memories WHERE seq IN ({marks})",
                     [int(k) for k in head])  # type: ignore[call-overload]
    asks = [seq for seq, content in rows if only_asks(str(content or ""))]
    out: dict[Hashable, float] = {seq: -ASKS_PENALTY for seq in asks}
    if ASK_LEND > 0 and asks:
        pool = sorted(scores, key=lambda k: -scores[k])[:CONTEXT_DEPTH]
        near = neighbours(conn, [int(k) for k in pool])  # type: ignore[call-overload]
        floor = min(scores.values())
        for seq in asks:
            for after in near.get(int(seq), []):
                if after > seq:
                    out[after] = out.get(after, 0.0) + ASK_LEND * (scores[seq] - floor)
    return out
