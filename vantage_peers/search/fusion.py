"""Reciprocal Rank Fusion: merge ranked lists without comparing their raw scores.

score(d) = Σ over lists containing d of 1 / (k + rank(d)), rank starting at 1, k = 60 (Cormack et al.).
BM25 scores and cosine distances live on different scales; RRF only uses positions, so neither
ranker needs calibrating against the other.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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


def fused_docs(fused: Sequence[Fused], rows: Mapping[Hashable, dict[str, Any]], distances: Mapping[Hashable, float],
               shape: Callable[[dict[str, Any]], dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """Fused hits as documents: `score`, `matchedBy`, `ranks`, `similarity` (vector hits) and `snippet`
    (keyword hits). Keys with no row (left the scope, or deleted since they were indexed) are skipped."""
    items: list[dict[str, Any]] = []
    for hit in fused:
        row = rows.get(hit.key)
        if row is None:
            continue
        row = dict(row)
        snippet = row.pop("snippet", None)
        row.pop("rank", None)
        doc = shape(row)
        doc["score"] = round(hit.score, 6)
        doc["matchedBy"] = hit.matched_by
        doc["ranks"] = hit.ranks
        if hit.key in distances:
            doc["similarity"] = round(1.0 - distances[hit.key], 6)
        if snippet is not None:
            doc["snippet"] = snippet
        items.append(doc)
        if len(items) >= limit:
            break
    return items
