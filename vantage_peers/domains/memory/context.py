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
from ...db.dialect import among

CONTEXT_WEIGHT = 0.3  # share of the neighbour's score above the floor; 0.2-0.5 all help LoCoMo and Cranfield
SESSION_GAP_MS = 30 * 60_000  # turns further apart than this are different sessions
CONTEXT_DEPTH = 100  # only the head of the fused list lends and borrows (bounded cost)

# The candidates in write order per namespace (createdAt, id), each with the one before it, kept when
# both are of one session and nothing else of the namespace was written between them: one statement
# (PostgreSQL paid a round trip per close pair before: ≈10 ms per recall at 100k memories).
_ADJACENT = (
    "WITH vp_c AS (SELECT namespace, createdAt, id, seq FROM memories WHERE {picked}), "
    "vp_o AS (SELECT namespace AS ns, createdAt AS at_b, id AS id_b, seq AS seq_b, "
    "LAG(namespace) OVER w AS ns_a, LAG(createdAt) OVER w AS at_a, LAG(id) OVER w AS id_a, LAG(seq) OVER w AS seq_a "
    "FROM vp_c WINDOW w AS (ORDER BY namespace, createdAt, id, seq)) "
    "SELECT seq_a, seq_b FROM vp_o WHERE ns_a = ns AND at_b - at_a <= ? AND (seq_b = seq_a + 1 OR NOT EXISTS "
    "(SELECT 1 FROM memories m WHERE m.namespace = vp_o.ns AND (m.createdAt, m.id) > (vp_o.at_a, vp_o.id_a) "
    "AND (m.createdAt, m.id) < (vp_o.at_b, vp_o.id_b))) ORDER BY seq_a")


def adjacent(conn: Connection, seqs: list[int]) -> list[tuple[int, int]]:
    """(earlier, later) pairs of `seqs` written one just after the other in their namespace, within
    SESSION_GAP_MS (nothing else of that namespace written between them).

    Consecutive seqs (the usual case: a conversation stored turn by turn) are adjacent at once; only
    a close pair with a seq gap costs an indexed check, all inside the one statement."""
    if len(seqs) < 2:
        return []
    picked, keys = among(conn.backend, "seq", seqs)
    return [(int(a), int(b)) for a, b in conn.rows(_ADJACENT.format(picked=picked), [*keys, SESSION_GAP_MS])]


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
