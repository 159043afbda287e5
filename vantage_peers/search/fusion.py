"""Fusing the keyword and vector rankings into one list.

`convex` (what the search tools use): z-score normalized convex combination.
  For each ranker, its candidates' scores (BM25 as -bm25, higher is better; vector as cosine
  similarity) become z-scores over that ranker's own candidate list: z = (s - mean) / std.
  A candidate a ranker did not return gets that ranker's lowest z (it ranked below everything the
  ranker listed). score(d) = Σ weight(r) · z_r(d), with the weights summing to 1 over the rankers
  that returned anything (VECTOR_WEIGHT for the vector ranker, the rest for keyword).
  Unlike RRF it keeps *how much* better a hit is: a clear vector match is not outranked by a row
  that merely holds a stopword at BM25 rank 1. Measured on shared/ir/ (docs/memory.md).
`rrf`: Reciprocal Rank Fusion, score(d) = Σ 1 / (k + rank(d)), k = 60 — the former fusion, kept
  for comparison in benchmarks/retrieval.py.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

RRF_K = 60
# Share of the vector ranker in the convex fusion. 0.6 wins on both shipped collections with the
# local model (benchmarks/retrieval.py); the fused ranking stays above either ranker alone for
# weights 0.4-0.7, so it is not tuned to one collection.
VECTOR_WEIGHT = 0.6
WEIGHTS = {"keyword": 1.0 - VECTOR_WEIGHT, "vector": VECTOR_WEIGHT}


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


def _zscores(scores: Sequence[float]) -> list[float]:
    n = len(scores)
    mean = sum(scores) / n
    std = (sum((x - mean) ** 2 for x in scores) / n) ** 0.5
    return [0.0 if std <= 1e-12 else (x - mean) / std for x in scores]


def convex(lists: Mapping[str, Sequence[tuple[Hashable, float]]], *, weights: Mapping[str, float] | None = None,
           limit: int | None = None) -> list[Fused]:
    """Fuse `{ranker: [(key, score), best first]}` (higher score is better) into one list, best first.

    Ties are broken by the best single rank, then by first appearance, so the result is deterministic.
    """
    weights = WEIGHTS if weights is None else weights
    present = {name: items for name, items in lists.items() if items}
    total = sum(weights.get(name, 0.0) for name in present)
    fused: dict[Hashable, Fused] = {}
    floors: dict[str, float] = {}
    zmaps: dict[str, dict[Hashable, float]] = {}
    for name, items in present.items():
        best: dict[Hashable, tuple[int, float]] = {}
        for position, (key, score) in enumerate(items, start=1):
            if key not in best:  # a ranker listing a key twice counts it once, at its best rank
                best[key] = (position, float(score))
        keys = list(best)
        z = _zscores([best[k][1] for k in keys])
        zmaps[name] = dict(zip(keys, z, strict=True))
        floors[name] = min(z)
        for key in keys:
            fused.setdefault(key, Fused(key, 0.0)).ranks[name] = best[key][0]
    for item in fused.values():
        item.score = sum((weights.get(name, 0.0) / total if total else 1.0 / len(present))
                         * zmaps[name].get(item.key, floors[name]) for name in present)
    order = {key: i for i, key in enumerate(fused)}
    ordered = sorted(fused.values(), key=lambda f: (-f.score, min(f.ranks.values()), order[f.key]))
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
