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

# Which close pairs have another memory of their namespace written between them: one statement for
# all of them (a round trip each cost PostgreSQL ≈10 ms per recall at 100k memories in one namespace).
_BETWEEN = ("WITH vp_pair(i, ns, at_a, id_a, at_b, id_b) AS (VALUES {rows}) "
            "SELECT p.i FROM vp_pair p WHERE EXISTS (SELECT 1 FROM memories m WHERE m.namespace = p.ns "
            "AND (m.createdAt, m.id) > (p.at_a, p.id_a) AND (m.createdAt, m.id) < (p.at_b, p.id_b))")
_PAIR = "(CAST(? AS BIGINT), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS TEXT))"


def adjacent(conn: Connection, seqs: list[int]) -> list[tuple[int, int]]:
    """(earlier, later) pairs of `seqs` written one just after the other in their namespace, within
    SESSION_GAP_MS (nothing else of that namespace written between them).

    One query for the rows; then consecutive seqs (the usual case: a conversation stored turn by
    turn) are adjacent at once, and the close pairs with a seq gap are checked together by index."""
    if len(seqs) < 2:
        return []
    marks = ",".join("?" for _ in seqs)
    rows = sorted(conn.rows(f"SELECT namespace, createdAt, id, seq FROM memories WHERE seq IN ({marks})", seqs))
    close, gapped = [], []
    for (ns_a, at_a, id_a, seq_a), (ns_b, at_b, id_b, seq_b) in zip(rows, rows[1:], strict=False):
        if ns_a != ns_b or at_b - at_a > SESSION_GAP_MS:
            continue
        close.append((int(seq_a), int(seq_b)))
        if seq_b != seq_a + 1:
            gapped.append((len(close) - 1, ns_a, at_a, id_a, at_b, id_b))
    if gapped:
        sql = _BETWEEN.format(rows=",".join(_PAIR for _ in gapped))
        between = {int(i) for (i,) in conn.rows(sql, [x for pair in gapped for x in pair])}
        close = [pair for i, pair in enumerate(close) if i not in between]
    return close


def neighbours(conn: Connection, seqs: list[int]) -> dict[int, list[int]]:
    """seq -> those of `seqs` written just before or just after it (see `adjacent`)."""
    out: dict[int, list[int]] = {int(s): [] for s in seqs}
    for earlier, later in adjacent(conn, seqs):
        out[earlier].append(later)
        out[later].append(earlier)
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
