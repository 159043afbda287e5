"""Fusing the keyword and vector rankings into one list.

`convex` (what the search tools use): z-score normalized convex combination.
  For each ranker, its candidates' scores (BM25 as -bm25, higher is better; vector as cosine
  similarity) become z-scores over that ranker's own candidate list: z = (s - mean) / std.
  A candidate a ranker did not return gets that ranker's lowest z (it ranked below everything the
  ranker listed). score(d) = Σ weight(r) · z_r(d), with the weights summing to 1 over the rankers
  that returned anything (VECTOR_WEIGHT for the vector ranker, the rest for keyword).
  A list with no spread (one hit) is not flattened: its items sit one unit above the floor. A short
  keyword list (rare words: an id, a codename) keeps its BM25 positions (exact evidence, #20).
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
# Exact evidence (#20): a keyword list of at most EXACT_MAX hits means rare words (an id, a
# codename); its hits keep their BM25 positions unless the vector list holds an outlier
# (z ≥ STRONG_Z) they do not. Both are z-units and counts, not model similarities, so they hold for
# any embedder; measured on all four development collections (docs/memory.md).
EXACT_MAX = 5
STRONG_Z = 6.0


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


def _zscores(scores: Sequence[float]) -> tuple[list[float], float]:
    """(z-scores of `scores`, the floor an unlisted candidate gets).

    A list with no spread (one item, or all equal) is not flattened: its items are the only ones
    this ranker found, so they sit one unit above the floor (the bug of #20: a single BM25 hit got
    the floor, the same as documents it never matched, and the vector side alone decided)."""
    n = len(scores)
    mean = sum(scores) / n
    std = (sum((x - mean) ** 2 for x in scores) / n) ** 0.5
    if std <= 1e-12 * max(1.0, abs(mean)):
        return [1.0] * n, 0.0
    z = [(x - mean) / std for x in scores]
    return z, min(z)


def _strong(z: Mapping[Hashable, float], exclude: set[Hashable]) -> bool:
    """Does the ranker hold a clear outlier (z ≥ STRONG_Z) that is not in `exclude`?"""
    return any(value >= STRONG_Z for key, value in z.items() if key not in exclude)


def _keep_exact(ordered: list[Fused], exact: Sequence[Hashable]) -> list[Fused]:
    """`ordered` with each key of `exact` (BM25 order) moved up to at most its BM25 position."""
    by_key = {f.key: f for f in ordered}
    pinned = [by_key[k] for k in exact if k in by_key]
    out: list[Fused] = []
    placed: set[Hashable] = set()
    rest = iter(ordered)
    while len(out) < len(ordered):
        nxt = next((p for p in pinned if p.key not in placed), None)
        if nxt is not None and exact.index(nxt.key) <= len(out):
            out.append(nxt)
            placed.add(nxt.key)
            continue
        for item in rest:
            if item.key not in placed:
                out.append(item)
                placed.add(item.key)
                break
        else:  # only pinned keys are left: they follow in BM25 order
            assert nxt is not None
            out.append(nxt)
            placed.add(nxt.key)
    return out


def convex(lists: Mapping[str, Sequence[tuple[Hashable, float]]], *, weights: Mapping[str, float] | None = None,
           limit: int | None = None, exact_max: int | None = None,
           adjust: Callable[[Mapping[Hashable, float]], Mapping[Hashable, float]] | None = None) -> list[Fused]:
    """Fuse `{ranker: [(key, score), best first]}` (higher score is better) into one list, best first.

    Exact evidence: when the keyword list is short (≤ `exact_max` hits, default EXACT_MAX: the
    query's words are rare — an id, a codename, a ticket number) and the vector list holds no
    clear outlier outside it, every keyword hit keeps at least its BM25 position.
    `adjust(scores)` returns bonuses added to fused scores before ordering (the caller's context, e.g.
    adjacent memories); exact evidence is kept after it.
    Ties are broken by the best single rank, then by first appearance, so the result is deterministic.
    """
    # Read at call time (not the import-time WEIGHTS) so a benchmark variant can change VECTOR_WEIGHT.
    weights = {"keyword": 1.0 - VECTOR_WEIGHT, "vector": VECTOR_WEIGHT} if weights is None else weights
    exact_max = EXACT_MAX if exact_max is None else exact_max
    present = {name: items for name, items in lists.items() if items}
    total = sum(weights.get(name, 0.0) for name in present)
    fused: dict[Hashable, Fused] = {}
    floors: dict[str, float] = {}
    zmaps: dict[str, dict[Hashable, float]] = {}
    order_of: dict[str, list[Hashable]] = {}
    for name, items in present.items():
        best: dict[Hashable, tuple[int, float]] = {}
        for position, (key, score) in enumerate(items, start=1):
            if key not in best:  # a ranker listing a key twice counts it once, at its best rank
                best[key] = (position, float(score))
        keys = list(best)
        order_of[name] = keys
        z, floors[name] = _zscores([best[k][1] for k in keys])
        zmaps[name] = dict(zip(keys, z, strict=True))
        for key in keys:
            fused.setdefault(key, Fused(key, 0.0)).ranks[name] = best[key][0]
    for item in fused.values():
        item.score = sum((weights.get(name, 0.0) / total if total else 1.0 / len(present))
                         * zmaps[name].get(item.key, floors[name]) for name in present)
    if adjust is not None and fused:
        for key, extra in adjust({k: f.score for k, f in fused.items()}).items():
            if key in fused:
                fused[key].score += extra
    order = {key: i for i, key in enumerate(fused)}
    ordered = sorted(fused.values(), key=lambda f: (-f.score, min(f.ranks.values()), order[f.key]))
    exact = order_of.get("keyword", [])
    if exact and len(present) > 1 and len(exact) <= exact_max and not _strong(zmaps.get("vector", {}), set(exact)):
        ordered = _keep_exact(ordered, exact)
    return ordered[:limit] if limit is not None else ordered


def fused_docs(fused: Sequence[Fused], rows: Mapping[Hashable, dict[str, Any]], distances: Mapping[Hashable, float],
               shape: Callable[[dict[str, Any]], dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """Fused hits as documents: `score`, `matchedBy`, `ranks`, `similarity` (vector hits), `snippet` and
    `matchedTerms` (keyword hits, when the rows carry them). Keys with no row (left the scope, or deleted since they were indexed) are skipped."""
    items: list[dict[str, Any]] = []
    for hit in fused:
        row = rows.get(hit.key)
        if row is None:
            continue
        row = dict(row)
        snippet = row.pop("snippet", None)
        terms = row.pop("matchedTerms", None)
        row.pop("rank", None)
        doc = shape(row)
        doc["score"] = round(hit.score, 6)
        doc["matchedBy"] = hit.matched_by
        doc["ranks"] = hit.ranks
        if hit.key in distances:
            doc["similarity"] = round(1.0 - distances[hit.key], 6)
        if snippet is not None:
            doc["snippet"] = snippet
        if terms is not None:
            doc["matchedTerms"] = terms
        items.append(doc)
        if len(items) >= limit:
            break
    return items
