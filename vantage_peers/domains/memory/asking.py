"""A memory that only asks is not the answer to a question; the one written after it may be (#20).

When the query is a question, candidates of the head that are themselves short questions
(search/asking.py) lose ASKS_PENALTY fused z-units (search/fusion.py): they reorder against close
candidates and never sink a clear match. And the memory written just after such a candidate in the
same session (context.py `adjacent`: its reply, in a conversation stored turn by turn) gains
ASK_LEND × (the question's fused score − the lowest): "Did you go to the pottery class?" matches
the query, "Yes! I made a bowl" answers it without sharing a word. This is on top of the session
context every neighbour lends (context.py, computed on the scores before these adjustments).
Only candidates lend and borrow (the head ASKS_DEPTH is read, CONTEXT_DEPTH can borrow).
Measured on the four development collections (benchmarks/retrieval.py, docs/recall.md
"Questions are not answers").
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from ...db import Connection
from ...db.dialect import among
from ...search.asking import SHORT_CHARS, is_question, only_asks
from .context import CONTEXT_DEPTH, adjacent

ASKS_PENALTY = 0.6  # 0.3 / 0.6 / 1.0 measured: LoCoMo-dev R@5 rises with it, nothing else moves
ASK_LEND = 0.6  # 0.3 / 0.6 / 1.0 measured; the question's reply gains this share of its score
ASKS_DEPTH = 50  # only the head of the fused list is read (bounded cost)


def asking_adjust(conn: Connection, query: str, scores: Mapping[Hashable, float]) -> dict[Hashable, float]:
    """Adjustment per candidate: −ASKS_PENALTY for a head candidate that only asks, + a share of its
    score for the memory written just after it; {} when the query is not a question."""
    if not scores or (ASKS_PENALTY <= 0 and ASK_LEND <= 0) or not is_question(query):
        return {}
    head = sorted(scores, key=lambda k: -scores[k])[:ASKS_DEPTH]
    picked, keys = among(conn.backend, "seq", head)  # type: ignore[arg-type]
    # Enough characters to tell a short question from a long text (only_asks reads no more).
    rows = conn.rows(f"SELECT seq, substr(content, 1, {SHORT_CHARS * 4 + 1}) FROM memories WHERE {picked}", keys)
    asks = [seq for seq, content in rows if only_asks(str(content or ""))]
    out: dict[Hashable, float] = {seq: -ASKS_PENALTY for seq in asks}
    if ASK_LEND > 0 and asks:
        pool = sorted(scores, key=lambda k: -scores[k])[:CONTEXT_DEPTH]
        floor = min(scores.values())
        asked = set(asks)
        for earlier, later in adjacent(conn, [int(k) for k in pool]):  # type: ignore[call-overload]
            if earlier in asked and scores[earlier] > floor:
                out[later] = out.get(later, 0.0) + ASK_LEND * (scores[earlier] - floor)
    return out
