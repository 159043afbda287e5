"""search_fix_patterns: BM25 and KNN over fix patterns, fused by z-score convex combination, in one read snapshot.

The same machinery as recall (domains/memory/search.py), over the fix-pattern tables:
- Keyword ranker: FTS5 BM25 over `fixPatterns_fts` (symptom weighted 2, root cause and tags 1,
  stack 0.5); any word of the query matches, user text is always quoted.
- Vector ranker: KNN in `fixPatterns_vec` (cosine), the `project` filter applied inside the KNN.
- Fusion: search/fusion.py `convex` (vector weight 0.6); each hit carries `score`, `matchedBy`, `ranks`, `similarity`
  (1 - cosine distance) when the vector ranker found it, `snippet` when the keyword ranker did.
Every project is searched unless `project` names one (`sourceProject` only records the origin).
The query vector is computed by the caller before the read; `vector=None` is keyword mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.envelope import cut
from ...db import Connection, Row
from ...db.paging import equals
from ...search import vectors
from ...search.fts import fts_query
from ...search.fusion import convex, fused_docs
from ...search.keyword import keyword_rows
from ...search.snippets import add_snippets
from .embedding import VEC
from .store import pattern_doc

DEFAULT_LIMIT = 10
MAX_LIMIT = 200
FTS = "fixPatterns_fts"
WEIGHTS = (2.0, 1.0, 1.0, 0.5)  # symptom, rootCause, tags, stack


def depth_for(limit: int) -> int:
    """Candidates each ranker contributes before fusion."""
    return min(max(limit * 3, 100), 600)


def keyword_hits(conn: Connection, *, query: str, project: str | None, limit: int) -> list[Row]:
    """Patterns holding any word of `query`, best BM25 first, each with `rank` (snippets: search())."""
    words = fts_query(query, mode="or")
    if words is None:
        return []
    where, params = equals([("d.sourceProject", project)])
    return keyword_rows(conn, fts=FTS, table="fixPatterns", match=words, where=where, params=params, limit=limit,
                        weights=WEIGHTS)


def vector_hits(conn: Connection, vector: Sequence[float], *, project: str | None, k: int) -> list[tuple[int, float]]:
    if not vectors.table_exists(conn, VEC):
        return []
    clauses, params = ([], []) if project is None else (["sourceProject = ?"], [project])
    return vectors.nearest(conn, VEC, vector, k=k, clauses=clauses, params=params)


LITE_KEYS = ("_id", "sourceProject", "score", "snippet", "validated", "preview")


def lite(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Hits cut to LITE_KEYS; `preview` = the first 160 characters of the symptom."""
    out = []
    for item in items:
        symptom = str(item.get("symptom") or "")
        doc = {k: item[k] for k in LITE_KEYS if k in item}
        doc["preview"] = symptom if len(symptom) <= 160 else symptom[:160] + "…"
        out.append(doc)
    return out


def search(conn: Connection, *, query: str, vector: Sequence[float] | None, reason: str | None,
           project: str | None, limit: int, fields: str = "full") -> dict[str, Any]:
    """`{mode: "hybrid"|"keyword", reason?, items}`, best first, at most `limit` items."""
    depth = depth_for(limit)
    kw_rows = {row["seq"]: row for row in keyword_hits(conn, query=query, project=project, limit=depth)}
    distances = dict(vector_hits(conn, vector, project=project, k=depth)) if vector is not None else {}
    lists = {"keyword": [(seq, -row["rank"]) for seq, row in kw_rows.items()],
             "vector": [(seq, 1.0 - dist) for seq, dist in distances.items()]}
    fused = convex(lists)
    missing = [f.key for f in fused if f.key not in kw_rows]
    rows = dict(kw_rows)
    if missing:
        marks = ",".join("?" for _ in missing)
        rows.update({r["seq"]: r for r in conn.query(f"SELECT * FROM fixPatterns WHERE seq IN ({marks})", missing)})
    # Snippets only for the keyword hits that are returned, not for every fused candidate.
    returned = [f.key for f in fused if f.key in rows][:limit]
    words = fts_query(query, mode="or")
    if words is not None:
        hits = [rows[key] for key in returned if key in kw_rows]
        add_snippets(hits, words, ("symptom", "rootCause", "tags", "stack"))  # the first column holding a term
    items = fused_docs(fused, rows, distances, pattern_doc, limit)
    if fields == "lite":
        items = lite(items)
    envelope: dict[str, Any] = {"mode": "hybrid"} if vector is not None else {
        "mode": "keyword", "reason": reason or "no query embedding"}
    return cut(items, envelope)
