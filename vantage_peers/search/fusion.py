"""Reciprocal Rank Fusion: merge ranked lists without comparing their raw scores.

score(d) = Σ over lists containing d of 1 / (k + rank(d)), rank starting at 1, k = 60 (Cormack et al.).
BM25 scores and cosine distances live on different scales; RRF only uses positions, so neither
ranker needs calibrating against the other.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

RRF_K = 60


@dataclass
class Fused:
    key: Hashable
    score: float
    ranks: dict[str, int] = field(default_factory=dict)

    @property
    def matched_by(self) -> list[str]:
        return sorted(self.ranks)


def rrf(lists: Mapping[str, Sequence[Hashable]], *, k: int = RRF_K, limit: int | None = None) -> list[Fused]:
    """Fuse `{ranker name: [key, best first]}` into one list, best first.

    Ties (same score) are broken by the best single rank, then by ranker order, so the result is
    deterministic.
    """
    fused: dict[Hashable, Fused] = {}
    for name, keys in lists.items():
        seen: set[Hashable] = set()
        for position, key in enumerate(keys, start=1):
            if key in seen:  # a ranker listing a key twice counts it once, at its best rank
                continue
            seen.add(key)
            item = fused.setdefault(key, Fused(key, 0.0))
            item.score += 1.0 / (k + position)
            item.ranks[name] = position
    ordered = sorted(fused.values(), key=lambda f: (-f.score, min(f.ranks.values())))
    return ordered[:limit] if limit is not None else ordered
