"""MCP tools for memories and memory search (recall, text_search, hybrid_search)."""

from __future__ import annotations

from typing import Any

from ...core.compact import Compact, Detail, dense_text_for, shape
from ...core.errors import InvalidArgument
from ...core.ids import now_ms
from ...core.validators import MAX_CONTENT_BYTES, check_choice, require_query, require_text
from ...db.paging import Fields, check_fields, clamp_limit
from ...pipeline.app import App
from ...pipeline.policy import declared_loader
from ...search.doctrine import with_doctrine
from . import indexer, overlap, search, store
from .models import (
    MEMORY_TYPES,
    RELATION_TYPES,
    SEVERITIES,
    Episode,
    MemoryTypeArg,
    Relation,
    TypeFilterArg,
    check_types,
)
from .services import services

RECALL_TOOL_DESCRIPTION = with_doctrine("""Find the memories most relevant to a question (meaning and keywords).

`namespace`: exact, `prefix/*`, or all; `mode` "keyword" means no embedding.""")

TEXT_SEARCH_TOOL_DESCRIPTION = with_doctrine("""Search memories by keyword (BM25) for exact words, names and ids; all words, else any (`match`).""")

HYBRID_SEARCH_TOOL_DESCRIPTION = with_doctrine("""Search memories by vector + BM25; arguments and result as recall.""")

# Compact answers (core/compact.py): a hit is its id, type, why it matched, a one-line snippet and its day.
HIT = Compact(keys=("_id", "namespace", "type", "matchedBy"), text=("content",))
MEMORY = Compact(keys=("_id", "namespace", "type"), text=("content",))


def _episode(value: Episode | None) -> dict[str, Any] | None:
    if value is None:
        return None
    data = value.model_dump(exclude_none=True)
    for name in ("context", "goal", "action", "outcome", "insight"):
        require_text(data[name], f"episode.{name}", max_bytes=MAX_CONTENT_BYTES)
    if "severity" in data:
        check_choice(data["severity"], "episode.severity", SEVERITIES)
    return data


def register(app: App) -> None:
    db = app.db
    svc = services(app)
    app.add_record("memory", declared_loader("memory"))
    app.add_corpus(indexer.MEMORIES)
    app.add_job("embeddings", lambda: indexer.embed_pending(db, svc.embedder, owner=svc.owner, corpora=app.corpora))
    app.add_job("memory-expiry", lambda: db.write(lambda c: store.purge_expired(c)))
    dense_text_for(app, ("recall", "text_search", "hybrid_search", "list_memories"))

    def run_search(query: Any, namespace: str | None, type_: Any, limit: int | None, include: bool | None,
                   fields: Any = "full", detail: Any = "compact", *, keyword_only: bool = False,
                   rerank: bool = False) -> dict[str, Any]:
        return shape(_search(query, namespace, type_, limit, include, fields, keyword_only=keyword_only,
                             rerank=rerank), detail, HIT, fields=fields)

    def _search(query: Any, namespace: str | None, type_: Any, limit: int | None, include: bool | None,
                fields: Any, *, keyword_only: bool, rerank: bool) -> dict[str, Any]:
        text = require_query(query)
        projection = check_fields(fields)
        scope = store.scope_of(namespace, visible=app.read_prefixes())
        types = check_types(type_)
        size = clamp_limit(limit, search.DEFAULT_LIMIT, search.MAX_LIMIT)
        now = now_ms()
        if keyword_only:
            return db.read(lambda c: search.text_search(
                c, query=text, scope=scope, types=types, include_superseded=bool(include), limit=size, now=now, fields=projection))
        scorer = svc.reranker() if rerank else None
        return overlap.recall(db, query=text, embed=lambda: svc.query_vector(db, text), scope=scope, types=types,
                              include_superseded=bool(include), limit=size, now=now, fields=projection,
                              rerank=scorer, rerank_k=app.settings.rerank_top_k)

    @app.tool("write", identity="createdBy", idempotent=True)
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
        """Store a memory, found by keyword at once and by meaning within seconds; returns `{memoryId}`.

        `ttl`: an ISO 8601 expiry datetime.
        """
        who = createdBy
        ns = store.check_namespace(namespace)
        kind = check_choice(type, "type", MEMORY_TYPES)
        text = require_text(content, "content", max_bytes=MAX_CONTENT_BYTES)
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
        """Fetch a memory by id, archived ones too; null when expired."""
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
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """List a namespace's memories (exact or `prefix/*`), newest first, archived ones with `includeSuperseded`."""
        if namespace is None or namespace == "":
            raise InvalidArgument("namespace is required (exact, or 'prefix/*')")
        scope = store.scope_of(namespace, visible=app.read_prefixes())
        types = check_types(type)
        return shape(db.read(lambda c: store.list_memories(
            c, scope=scope, types=types, include_superseded=includeSuperseded, limit=limit, cursor=cursor,
            fields=fields)), detail, MEMORY, fields=fields)

    @app.tool("destructive", shared="memories are guarded by namespace scopes, not by author")
    def soft_delete_memory(memoryId: str) -> None:
        """Archive a memory: out of lists and searches, kept for audit; returns null."""
        db.write(lambda c: store.soft_delete(c, memory_id=memoryId))

    @app.tool("read", description=RECALL_TOOL_DESCRIPTION)
    def recall(
        query: str,
        namespace: str | None = None,
        type: TypeFilterArg = None,
        limit: int | None = None,
        includeSuperseded: bool = False,
        fields: Fields = "full",
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        return run_search(query, namespace, type, limit, includeSuperseded, fields, detail, rerank=True)

    @app.tool("read", description=TEXT_SEARCH_TOOL_DESCRIPTION)
    def text_search(
        query: str,
        namespace: str | None = None,
        limit: int | None = None,
        type: TypeFilterArg = None,
        includeSuperseded: bool = False,
        fields: Fields = "full",
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        return run_search(query, namespace, type, limit, includeSuperseded, fields, detail, keyword_only=True)

    @app.tool("read", description=HYBRID_SEARCH_TOOL_DESCRIPTION)
    def hybrid_search(
        query: str,
        namespace: str | None = None,
        limit: int | None = None,
        type: TypeFilterArg = None,
        includeSuperseded: bool = False,
        fields: Fields = "full",
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        return run_search(query, namespace, type, limit, includeSuperseded, fields, detail)
