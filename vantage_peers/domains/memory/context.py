"""Context from adjacent memories of the same session (#20).

In a conversation stored one turn per memory, the turn that answers a question is often next to
the one that matches it ("Did you go to the support group?" … "Yes, yesterday — it was great").
So a fused candidate gains a share of its best *neighbour's* fused score: the memory written just
before or just after it in the same namespace, within SESSION_GAP_MS of it (one session), when that
neighbour is itself a candidate. Memories far apart in time, or in other namespaces, never lend.

Measured on the development collections (benchmarks/retrieval.py, docs/memory.md): LoCoMo-dev R@5
0.630 → 0.667, Cranfield nDCG@10 0.408 → 0.439, CISI 0.453 → 0.451, identifiers unchanged (exact
evidence keeps its place after this step).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from ...db import Connection

CONTEXT_WEIGHT = 0.3  # share of the neighbour's score above the floor; 0.2-0.5 all help LoCoMo and Cranfield
SESSION_GAP_MS = 30 * 60_000  # turns further apart than this are different sessions
CONTEXT_DEPTH = 100  # only the head of the fused list lends and borrows (bounded cost)

_PREV = ("SELECT seq, createdAt FROM memories WHERE namespace = ? AND (createdAt, id) < (?, ?) "
         "ORDER BY createdAt DESC, id DESC LIMIT 1")
_NEXT = ("SELECT seq, createdAt FROM memories WHERE namespace = ? AND (createdAt, id) > (?, ?) "
         "ORDER BY createdAt, id LIMIT 1")


def neighbours(conn: Connection, seqs: list[int]) -> dict[int, list[int]]:
    """seq -> the seqs written just before and after it in its namespace, within SESSION_GAP_MS."""
    if not seqs:
        return {}
    marks = ",".join("?" for _ in seqs)
    rows = conn.raw.execute(f"SELECT seq, namespace, createdAt, id FROM memories WHERE seq IN ({marks})",
                            seqs).fetchall()
    cur = conn.raw.cursor()
    out: dict[int, list[int]] = {}
    for seq, namespace, created, mid in rows:
        found = []
        for sql in (_PREV, _NEXT):
            for other, when in cur.execute(sql, (namespace, created, mid)):
                if abs(int(when) - int(created)) <= SESSION_GAP_MS:
                    found.append(int(other))
        out[int(seq)] = found
    return out


def context_bonus(conn: Connection, scores: Mapping[Hashable, float]) -> dict[Hashable, float]:
    """Bonus per candidate: CONTEXT_WEIGHT × (best neighbour's score − the lowest score), head only."""
    if len(scores) < 2:
        return {}
    head = sorted(scores, key=lambda k: -scores[k])[:CONTEXT_DEPTH]
    floor = min(scores.values())
    near = neighbours(conn, [int(k) for k in head])  # type: ignore[call-overload]
    lent = set(head)
    bonus: dict[Hashable, float] = {}
    for key in head:
        best = max((scores[n] for n in near.get(int(key), []) if n in lent), default=None)  # type: ignore[call-overload]
        if best is not None and best > floor:
            bonus[key] = CONTEXT_WEIGHT * (best - floor)
    return bonus
