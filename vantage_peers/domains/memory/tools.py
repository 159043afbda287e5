"""MCP tools for memories and memory search (recall, text_search, hybrid_search)."""

from __future__ import annotations

from typing import Any

from ...app import App, require_query, require_text
from ...errors import InvalidArgument
from ...ids import now_ms
from ...paging import Fields, check_fields, clamp_limit
from ...search.doctrine import with_doctrine
from . import indexer, search, store
from .models import (
    MEMORY_TYPES,
    RELATION_TYPES,
    SEVERITIES,
    Episode,
    MemoryTypeArg,
    Relation,
    TypeFilterArg,
    check_choice,
    check_types,
)
from .services import services

RECALL_TOOL_DESCRIPTION = with_doctrine("""Find the memories most relevant to a question: vector similarity fused with BM25.

Call it before answering anything about the project. `namespace` limits the search to one
namespace (exact, case-sensitive), `prefix/*` to every namespace under `prefix/`; omitted = all.
`type` = one memory type or a list. `limit` default 10 (3-5 for a targeted question, 10-20 to load
session context), max 200. Archived (superseded or soft-deleted) and expired memories are skipped
unless `includeSuperseded`. Returns `{mode, items}`: each item has `_id`, `namespace`, `type`,
`content`, `score` (z-score fusion: 0.6 × vector + 0.4 × keyword, higher is better), `matchedBy`
(["keyword", "vector"]), `ranks`, `similarity` when the vector ranker found it, `snippet` when the
keyword ranker did. `fields="lite"` = `_id`, `namespace`, `type`, `score`, `snippet`, `preview`
(first 160 characters): 100 hits fit one answer. `mode` is "hybrid", or "keyword" with a `reason`
when no embedding is available (VP_EMBEDDINGS=none, endpoint down): results then come from BM25.""")

TEXT_SEARCH_TOOL_DESCRIPTION = with_doctrine("""Full-text BM25 search over memory content, for exact words, names and identifiers.

Rows holding every word of `query` rank first; when none do, rows holding any word are returned
(`match` says "all" or "any"; common English words such as "with" or "the" do not count there).
Words are stemmed ("deploy" finds "deployed"); ids, SHAs, paths and snake_case match exactly.
Operators and punctuation in `query` are plain text; `fields="lite"` as in recall. `namespace`:
exact, `prefix/*`, or omitted for all. `limit` default 10, max 200. Returns `{mode: "keyword",
match, items}`; each item is the memory with `score` (higher is better) and a `snippet` with the
matches in [brackets]. Archived and expired memories are skipped unless `includeSuperseded`.""")

HYBRID_SEARCH_TOOL_DESCRIPTION = with_doctrine("""Combined vector + BM25 search over memories (z-score fusion, vector weight 0.6).

Same arguments and result as recall: `{mode, items}` with `score`, `matchedBy` and `ranks` per hit;
`mode` is "keyword" (with a `reason`) when no query embedding is available, never an empty result
because a key is missing. `namespace`: exact, `prefix/*`, or omitted for all; `limit` default 10, max 200.""")


def _episode(value: Episode | None) -> dict[str, Any] | None:
    if value is None:
        return None
    data = value.model_dump(exclude_none=True)
    for name in ("context", "goal", "action", "outcome", "insight"):
        require_text(data[name], f"episode.{name}", max_bytes=store.MAX_CONTENT_BYTES)
    if "severity" in data:
        check_choice(data["severity"], "episode.severity", SEVERITIES)
    return data


def register(app: App) -> None:
    db = app.db
    svc = services(app)
    app.add_job("embeddings", lambda: indexer.embed_pending(db, svc.embedder, owner=svc.owner))
    app.add_job("memory-expiry", lambda: db.write(lambda c: store.purge_expired(c)))

    def run_search(query: Any, namespace: str | None, type_: Any, limit: int | None, include: bool | None,
                   fields: Any = "full", *, keyword_only: bool = False) -> dict[str, Any]:
        text = require_query(query)
        projection = check_fields(fields)
        scope = store.scope_of(namespace)
        types = check_types(type_)
        size = clamp_limit(limit, search.DEFAULT_LIMIT, search.MAX_LIMIT)
        now = now_ms()
        if keyword_only:
            return db.read(lambda c: search.text_search(
                c, query=text, scope=scope, types=types, include_superseded=bool(include), limit=size, now=now, fields=projection))
        vector, reason = svc.query_vector(db, text)
        return db.read(lambda c: search.hybrid(
            c, query=text, vector=vector, reason=reason, scope=scope, types=types,
            include_superseded=bool(include), limit=size, now=now, fields=projection))

    @app.tool("write")
    def store_memory(
        namespace: str,
        type: MemoryTypeArg,
        content: str,
        createdBy: str | None = None,
        relations: list[Relation] | None = None,
        relatesTo: Relation | None = None,
        isLatest: bool | None = None,
        ttl: str | None = None,
        episode: Episode | None = None,
    ) -> dict[str, Any]:
        """Store a typed, namespaced memory; it is searchable at once by keyword, by meaning within seconds.

        `namespace` is exact and case-sensitive (`global`, `project/<name>`, `orchestrator/<name>`).
        `type`: user, feedback, project, reference, episode, fact, decision, architecture, note,
        warning, procedure or observation. `relations` = [{targetId, type}] (or one `relatesTo`),
        type updates|extends|derives|references|contradicts: `updates` archives the target
        (isLatest=false) in the same transaction. `ttl` = ISO 8601 datetime after which the memory
        is gone. `episode` = {context, goal, action, outcome, insight, severity} (prefer store_episode).
        Content up to 1 MiB (keep it under ~8,000 tokens: longer text is embedded truncated).
        Returns `{memoryId}`. `createdBy` defaults to VP_ORCHESTRATOR.
        """
        who = app.caller(createdBy, "createdBy")
        ns = store.check_namespace(namespace)
        kind = check_choice(type, "type", MEMORY_TYPES)
        text = require_text(content, "content", max_bytes=store.MAX_CONTENT_BYTES)
        edges = [r.model_dump() for r in (relations or [])] + ([relatesTo.model_dump()] if relatesTo else [])
        for i, edge in enumerate(edges):
            require_text(edge["targetId"], f"relations[{i}].targetId", max_bytes=200)
            check_choice(edge["type"], f"relations[{i}].type", RELATION_TYPES)
        payload = _episode(episode)
        now = now_ms()
        expires = store.parse_ttl(ttl, now) if ttl is not None else None
        result = db.write(lambda c: store.store_memory(
            c, namespace=ns, type=kind, content=text, created_by=who, relations=edges,
            is_latest=True if isLatest is None else bool(isLatest), ttl=ttl, expires_at=expires,
            episode=payload, now=now))
        app.wake("embeddings")  # the write queued an embedding job: embed it now, not at the next tick
        return result

    @app.tool("read")
    def get_memory(memoryId: str) -> dict[str, Any] | None:
        """Fetch one memory by id (archived ones too, with isLatest=false); null when unknown or expired."""
        row = db.read(lambda c: store.get_memory(c, memory_id=memoryId))
        return store.memory_doc(row) if row else None

    @app.tool("read")
    def list_memories(
        namespace: str,
        type: TypeFilterArg = None,
        includeSuperseded: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
        fields: Fields = "full",
    ) -> dict[str, Any]:
        """List the active memories of a namespace, newest first, optionally of one `type` (or a list).

        `namespace` is exact, or `prefix/*` for every namespace under `prefix/`. Archived
        (superseded or soft-deleted) memories appear only with `includeSuperseded`; expired never.
        Paged: `{items, nextCursor?}`; pass `nextCursor` back as `cursor` until it is absent.
        `limit` default 20, clamped to 1..200; `fields="lite"` = _id, _creationTime, namespace,
        type, createdBy, preview (first 160 characters).
        """
        if namespace is None or namespace == "":
            raise InvalidArgument("namespace is required (exact, or 'prefix/*')")
        scope = store.scope_of(namespace)
        types = check_types(type)
        return db.read(lambda c: store.list_memories(
            c, scope=scope, types=types, include_superseded=includeSuperseded, limit=limit, cursor=cursor,
            fields=fields))

    @app.tool("destructive")
    def soft_delete_memory(memoryId: str) -> None:
        """Soft-delete a memory: isLatest=false, gone from lists and searches, kept for audit.

        Returns null. Unknown (or expired) ids are refused with NOT_FOUND. To edit a memory, store the new
        version with a relation {targetId: old id, type: "updates"} instead.
        """
        db.write(lambda c: store.soft_delete(c, memory_id=memoryId))

    @app.tool("read", description=RECALL_TOOL_DESCRIPTION)
    def recall(
        query: str,
        namespace: str | None = None,
        type: TypeFilterArg = None,
        limit: int | None = None,
        includeSuperseded: bool = False,
        fields: Fields = "full",
    ) -> dict[str, Any]:
        return run_search(query, namespace, type, limit, includeSuperseded, fields)

    @app.tool("read", description=TEXT_SEARCH_TOOL_DESCRIPTION)
    def text_search(
        query: str,
        namespace: str | None = None,
        limit: int | None = None,
        type: TypeFilterArg = None,
        includeSuperseded: bool = False,
        fields: Fields = "full",
    ) -> dict[str, Any]:
        return run_search(query, namespace, type, limit, includeSuperseded, fields, keyword_only=True)

    @app.tool("read", description=HYBRID_SEARCH_TOOL_DESCRIPTION)
    def hybrid_search(
        query: str,
        namespace: str | None = None,
        limit: int | None = None,
        type: TypeFilterArg = None,
        includeSuperseded: bool = False,
        fields: Fields = "full",
    ) -> dict[str, Any]:
        return run_search(query, namespace, type, limit, includeSuperseded, fields)
