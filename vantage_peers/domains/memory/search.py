"""recall, text_search, hybrid_search and the episode searches, over one read snapshot.

- Keyword ranker: FTS5 BM25 over `memories_fts`; the namespace is also a token of the FTS row
  (`nsKey`), so BM25 is computed only for rows in scope — unless the scope holds most of the newest
  rows, where the token costs more than it keeps out (`_token_pays`).
- Vector ranker: KNN in the vec0 table (see search/vectors.py), namespace as partition key.
- Fusion: z-score convex combination, vector weight 0.6 (search/fusion.py `convex`), over up to
  DEPTH candidates per ranker. Each hit says which rankers found it (`matchedBy`), its rank in
  each (`ranks`), and `similarity` (1 - cosine distance) when the vector ranker found it.
- Context and dates: a candidate borrows from the adjacent memory of its session (context.py); a
  "when" question favours memories that say when, a named period memories written in it (dates.py);
  a question demotes memories that only ask (asking.py).
- `fields="lite"`: each hit cut to `_id`, `namespace`, `type`, `score`, `snippet`, `preview`, so
  100 hits fit the 50 KB envelope.
The query vector is computed by the caller before the read (the network never runs inside a
transaction); `vector=None` means keyword mode, with the reason reported.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ...core.envelope import cut
from ...db import Connection, Row
from ...search import bounded
from ...search.fts import MAX_TOKENS, fts_query, or_terms, query_tokens, ranked
from ...search.fusion import convex, fused_docs
from ...search.keyword import keyword_rows
from ...search.snippets import add_snippets as snippets_for
from . import vectors
from .asking import asking_adjust
from .context import context_bonus
from .dates import date_bonus
from .store import LIVE, PREVIEW_CHARS, memory_doc, rows_by_seq, scope_sql
from .vectors import Scope

DEFAULT_LIMIT = 10
MAX_LIMIT = 200
Shape = Callable[[Row], dict[str, Any]]


DEPTH = 100  # candidates per ranker: fewer loses recall@100 on shared/ir/, more buys nothing
# `matchedBy`, `matchedTerms`, `date` (#20): a hit explains itself, in lite too (additive keys).
LITE_KEYS = ("_id", "namespace", "type", "score", "snippet", "preview", "matchedBy", "matchedTerms", "date")


def depth_for(limit: int) -> int:
    """Candidates each ranker contributes before fusion."""
    return min(max(limit * 3, DEPTH), 600)


def lite(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Hits projected to LITE_KEYS; `preview` = the first PREVIEW_CHARS characters of the content."""
    out = []
    for item in items:
        content = str(item.get("content") or "")
        doc = {k: item[k] for k in LITE_KEYS if k in item}
        doc["preview"] = content if len(content) <= PREVIEW_CHARS else content[:PREVIEW_CHARS] + "…"
        out.append(doc)
    return out


def _ns_match(scope: Scope) -> str:
    """The MATCH clause of the scope's namespace token (`nsKey`; a prefix scope, a prefix token)."""
    token = '"n' + scope.value.encode("utf-8").hex().upper() + '"'
    return "nsKey : " + (token + "*" if scope.kind == "prefix" else token)


def _words(query: str, mode: str) -> str | None:
    return fts_query(query, mode="or" if mode == "or" else "and")


def fts_match(query: str, scope: Scope | None, mode: str) -> str | None:
    """The MATCH expression: the user's words (quoted) in `content`, plus the namespace token."""
    words = _words(query, mode)
    return None if words is None else _scoped(words, scope)


def _scoped(words: str, scope: Scope | None, token: bool = True) -> str:
    expr = f"content : ({words})"
    if token and scope is not None and scope.kind != "all":
        expr = f"{_ns_match(scope)} AND {expr}"
    return expr


def _token_pays(conn: Connection, scope: Scope | None) -> bool:
    """Should the ranking MATCH carry the namespace token? It keeps BM25 to the scope's rows, but
    FTS5 reads the token's whole doclist for its IDF and steps it at every match (at 100k memories in
    one namespace: 3.6 of a 7.5 ms ranking). When the scope holds most of the newest rows it keeps
    out few rows, and the namespace filter on the document (always in `where`) does that alone: the
    same rows, the same scores (the token's column weighs 0). The probes keep the token either way."""
    if scope is None or scope.kind == "all":
        return False
    return not bounded.dense(conn, fts="memories_fts", match=_ns_match(scope))


def _filters(scope: Scope | None, types: Sequence[str] | None, include_superseded: bool, now: int,
             alias: str = "m") -> tuple[list[str], list[Any]]:
    where, params = scope_sql(scope, f"{alias}.namespace")
    where.append(LIVE.replace("expiresAt", f"{alias}.expiresAt"))
    params.append(now)
    if not include_superseded:
        where.append(f"{alias}.isLatest = 1")
    if types:
        where.append(f"{alias}.type IN ({','.join('?' for _ in types)})")
        params.extend(types)
    return where, params


def keyword_hits(conn: Connection, *, query: str, scope: Scope | None, types: Sequence[str] | None,
                 include_superseded: bool, now: int, limit: int, mode: str = "and",
                 candidates: bool = False, token: bool | None = None) -> list[Row]:
    """Rows best BM25 first, each with `rank` (lower is better) and `snippet`; `candidates=True`
    returns only `seq` and `rank` (the fusion's input: whole rows are read for the hits kept).
    `token`: `_token_pays` for this scope, when the caller already knows it."""
    words = _words(query, mode)
    if words is None:
        return []
    where, params = _filters(scope, types, include_superseded, now, alias="d")
    if candidates and mode == "or":
        return _bounded_candidates(conn, query, scope, where, params, limit)
    match = _scoped(words, scope, token=_token_pays(conn, scope) if token is None else token)
    columns = "d.seq AS seq" if candidates else "d.*"
    rows = keyword_rows(conn, fts="memories_fts", table="memories", match=match, where=where, params=params,
                        limit=limit, weights=(1.0, 0.0), columns=columns)
    if not candidates:
        snippets_for(rows, match, "content", terms=True)  # bounded cost in Python (search/snippets.py), not FTS5 snippet()
    return rows


def _bounded_candidates(conn: Connection, query: str, scope: Scope | None, where: list[str], params: list[Any],
                        limit: int) -> list[Row]:
    """The fusion's keyword candidates (`seq`, `rank`) at a bounded cost: a word matching more than
    bounded.COMMON_ROWS memories is ranked over its newest ones (search/bounded.py)."""
    terms = or_terms(query)
    token = _token_pays(conn, scope)

    def rows(words: Sequence[str], extra: list[str], extra_params: list[Any]) -> list[Row]:
        return keyword_rows(conn, fts="memories_fts", table="memories", match=_scoped(" OR ".join(words), scope, token),
                            where=[*where, *extra], params=[*params, *extra_params], limit=limit,
                            weights=(1.0, 0.0), columns="d.seq AS seq")

    rare, floor = bounded.split(conn, fts="memories_fts", terms=terms,
                                match_of=lambda words: _scoped(" OR ".join(words), scope))
    if floor is None:
        return rows(terms, [], [])
    whole = rows(terms, [bounded.window_clause(conn, "memories_fts")], [floor])
    return bounded.merge(whole, rows(rare, [], []) if rare else [], limit)


def add_snippets(conn: Connection, rows: dict[int, Row], seqs: Sequence[int], *, query: str,
                 scope: Scope | None) -> None:
    """Set `snippet` on the rows of `seqs`: snippets are computed for the hits returned only, not
    for every candidate the fusion looked at (a snippet costs more than the BM25 ranking itself)."""
    match = fts_match(query, scope, "or")
    wanted = [seq for seq in seqs if seq in rows]
    if match is None or not wanted:
        return
    for seq in wanted:
        rows[seq] = dict(rows[seq])
    snippets_for([rows[seq] for seq in wanted], match, "content", terms=True)


def iso_date(ms: Any) -> str | None:
    """Epoch milliseconds as an ISO 8601 UTC timestamp (what `date` shows on a hit)."""
    if not isinstance(ms, int) or isinstance(ms, bool):
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def explain(items: list[dict[str, Any]], *, keyword_only: bool = False) -> None:
    """Additive fields saying why each hit is here: `date` (when it was stored), and for keyword
    search `matchedBy: ["keyword"]` (hybrid hits carry `matchedBy` and `ranks` from the fusion)."""
    for item in items:
        when = iso_date(item.get("_creationTime"))
        if when is not None:
            item["date"] = when
        if keyword_only:
            item.setdefault("matchedBy", ["keyword"])


def _finish(items: list[dict[str, Any]], envelope: dict[str, Any], fields: str = "full") -> dict[str, Any]:
    explain(items, keyword_only=envelope.get("mode") == "keyword" and "reason" not in envelope)
    if fields == "lite":
        items = lite(items)
    if query_tokens(envelope.pop("_query", "")) > MAX_TOKENS:
        envelope["queryTruncated"] = f"only the first {MAX_TOKENS} words of the query were searched"
    return cut(items, {k: v for k, v in envelope.items() if k != "items"})


def text_search(conn: Connection, *, query: str, scope: Scope | None, types: Sequence[str] | None,
                include_superseded: bool, limit: int, now: int, shape: Shape = memory_doc,
                fields: str = "full") -> dict[str, Any]:
    """BM25 search: rows holding every word; when none do, rows holding any of them."""
    args = dict(query=query, scope=scope, types=types, include_superseded=include_superseded, now=now, limit=limit,
                token=_token_pays(conn, scope))  # decided once for both passes (a probe on SQLite)
    rows, match = keyword_hits(conn, **args, mode="and"), "all"
    if not rows and len(query.split()) > 1:
        rows, match = keyword_hits(conn, **args, mode="or"), "any"
    items = ranked(rows, shape)
    return _finish(items, {"mode": "keyword", "match": match, "_query": query}, fields)


def vector_hits(conn: Connection, vector: Sequence[float], *, scope: Scope | None, types: Sequence[str] | None,
                include_superseded: bool, now: int, k: int) -> list[tuple[int, float]]:
    if not vectors.table_exists(conn):
        return []
    return vectors.knn(conn, vector, k=k, scope=scope, types=types, include_superseded=include_superseded, now=now)


def _rows_by_seq(conn: Connection, seqs: list[int], where: list[str], params: list[Any]) -> dict[int, Row]:
    return {row["seq"]: row for row in rows_by_seq(conn, seqs, where, params)}


def _reranked(conn: Connection, fused: list[Any], query: str, rerank: Callable[[str, list[str]], list[float]],
              k: int, where: list[str], params: list[Any]) -> list[Any]:
    """`fused` with its top `k` (those still readable) reordered by the reranker's scores."""
    rows = _rows_by_seq(conn, [f.key for f in fused[:k]], where, params)
    head = [f for f in fused[:k] if f.key in rows]
    scores = rerank(query, [rows[f.key]["content"] for f in head])
    order = sorted(range(len(head)), key=lambda i: -scores[i])  # stable: ties keep the fused order
    return [head[i] for i in order] + [f for f in fused[:k] if f.key not in rows] + list(fused[k:])


def _bonuses(conn: Connection, query: str, now: int, scores: Mapping[Hashable, float]) -> dict[Hashable, float]:
    """Context, date and asking adjustments on the fused scores (each computed on the same base scores)."""
    out = context_bonus(conn, scores)
    for extra_of in (date_bonus(conn, query, now, scores), asking_adjust(conn, query, scores)):
        for key, extra in extra_of.items():
            out[key] = out.get(key, 0.0) + extra
    return out


def keyword_candidates(conn: Connection, *, query: str, scope: Scope | None, types: Sequence[str] | None,
                       include_superseded: bool, now: int, limit: int) -> dict[int, float]:
    """The keyword ranker's share of a hybrid search for `limit` hits: {seq: BM25 rank}, best first."""
    return {row["seq"]: row["rank"] for row in keyword_hits(
        conn, query=query, scope=scope, types=types, include_superseded=include_superseded, now=now,
        limit=depth_for(limit), mode="or", candidates=True)}


def hybrid(conn: Connection, *, query: str, vector: Sequence[float] | None, reason: str | None,
           scope: Scope | None, types: Sequence[str] | None, include_superseded: bool, limit: int, now: int,
           shape: Shape = memory_doc, use_keyword: bool = True, fields: str = "full",
           rerank: Callable[[str, list[str]], list[float]] | None = None, rerank_k: int = 30,
           keyword: Callable[[], dict[int, float]] | None = None) -> dict[str, Any]:
    """Fuse BM25 and KNN (z-score convex); keyword mode (with `reason`) when there is no query vector.

    `rerank` (recall with VP_RERANK_MODEL, embedding/rerank.py) rescores the fused top `rerank_k` by
    (query, content) and reorders them; the rest keep their fused order.

    `use_keyword=False` is the semantic-only ranking (cosine order) of search_episodes_by_semantic,
    which still answers from BM25 when no vector is available.

    `keyword`: the keyword candidates computed elsewhere (`keyword_candidates` on another thread,
    memory/overlap.py), called once the KNN is done.
    """
    depth = depth_for(limit)
    distances: dict[int, float] = {}
    if vector is not None:
        distances = dict(vector_hits(conn, vector, scope=scope, types=types,
                                     include_superseded=include_superseded, now=now, k=depth))
    kw_ranks: dict[int, float] = {}
    if keyword is not None:
        kw_ranks = keyword()
    elif use_keyword or vector is None:
        kw_ranks = keyword_candidates(conn, query=query, scope=scope, types=types,
                                      include_superseded=include_superseded, now=now, limit=limit)
    lists: dict[str, list[tuple[int, float]]] = {}
    if kw_ranks:
        lists["keyword"] = [(seq, -rank) for seq, rank in kw_ranks.items()]
    if distances:
        lists["vector"] = [(seq, 1.0 - dist) for seq, dist in distances.items()]
    # Context (#20): a candidate borrows from an adjacent memory of the same session (context.py),
    # and dates count when the query asks "when" or names a period (dates.py). Only when both
    # rankers answered: keyword mode keeps BM25 order, semantic mode cosine order.
    fused = convex(lists, adjust=(lambda scores: _bonuses(conn, query, now, scores)) if len(lists) == 2 else None)
    where, params = _filters(scope, types, include_superseded, now)
    if rerank is not None and len(fused) > 1:
        fused = _reranked(conn, fused, query, rerank, rerank_k, where, params)
    # Whole rows (and snippets) only for the head of the fused list: its first `limit`, then, when a
    # row is gone (deleted since it was ranked), a margin beyond them.
    head = [f.key for f in fused[:limit]]
    rows = _rows_by_seq(conn, head, where, params)
    if len(rows) < len(head):
        more = [f.key for f in fused[limit: limit * 2 + 10]]
        rows.update(_rows_by_seq(conn, more, where, params))
        head += more
    shown = [seq for seq in head if seq in rows][:limit]  # the hits fused_docs returns
    add_snippets(conn, rows, [seq for seq in shown if seq in kw_ranks], query=query, scope=scope)
    items = fused_docs(fused[: len(head)], rows, distances, shape, limit)
    if vector is None:
        envelope: dict[str, Any] = {"mode": "keyword", "reason": reason or "no query embedding"}
    else:
        envelope = {"mode": "hybrid" if use_keyword else "semantic"}
        if reason:  # vectors answered, with a caveat (the old model's, while the index switches)
            envelope["reason"] = reason
    envelope["_query"] = query
    return _finish(items, envelope, fields)
