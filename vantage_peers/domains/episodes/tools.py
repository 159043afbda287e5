"""MCP tools for episodes: structured event records stored as memories of type `episode`."""

from __future__ import annotations

from typing import Any

from ...core.compact import Compact, Detail, dense_text_for, shape
from ...core.ids import now_ms
from ...core.validators import MAX_CONTENT_BYTES, check_choice, require_query, require_text
from ...db.paging import Fields, check_fields, clamp_limit
from ...pipeline.app import App
from ..memory import search
from ..memory import store as memories
from ..memory.models import EPISODE_FIELDS, SEVERITIES, SeverityArg
from ..memory.services import services

EPISODE = ["episode"]
# Compact answers (core/compact.py): an episode is its id, severity, why it matched, its insight on one line.
COMPACT = Compact(keys=("_id", "severity", "matchedBy"), text=("insight", "content"))


def register(app: App) -> None:
    db = app.db
    dense_text_for(app, ("list_episodes", "search_episodes_by_keyword", "search_episodes_by_semantic"))
    svc = services(app)

    def run_search(query: Any, namespace: str | None, limit: int | None, fields: Any = "full",
                   detail: Any = "compact", *, semantic: bool) -> dict[str, Any]:
        return shape(_search(query, namespace, limit, fields, semantic=semantic), detail, COMPACT, fields=fields)

    def _search(query: Any, namespace: str | None, limit: int | None, fields: Any, *,
                semantic: bool) -> dict[str, Any]:
        text = require_query(query)
        projection = check_fields(fields)
        scope = memories.scope_of(namespace, visible=app.read_prefixes())
        size = clamp_limit(limit, search.DEFAULT_LIMIT, search.MAX_LIMIT)
        now = now_ms()
        if not semantic:
            return db.read(lambda c: search.text_search(
                c, query=text, scope=scope, types=EPISODE, include_superseded=False, limit=size, now=now,
                shape=memories.episode_doc, fields=projection))
        vector, reason = svc.query_vector(db, text)
        return db.read(lambda c: search.hybrid(
            c, query=text, vector=vector, reason=reason, scope=scope, types=EPISODE, include_superseded=False,
            limit=size, now=now, shape=memories.episode_doc, use_keyword=False, fields=projection))

    @app.tool("write", identity="createdBy", idempotent=True)
    def store_episode(
        namespace: str,
        context: str,
        goal: str,
        action: str,
        outcome: str,
        insight: str,
        severity: SeverityArg,
        createdBy: str | None = None,
    ) -> dict[str, Any]:
        """Store an episode (context → goal → action → outcome → insight) after a failure or gotcha; returns `{memoryId}`."""
        who = createdBy
        ns = memories.check_namespace(namespace)
        values = {"context": context, "goal": goal, "action": action, "outcome": outcome, "insight": insight}
        payload = {name: require_text(values[name], name, max_bytes=MAX_CONTENT_BYTES)
                   for name in EPISODE_FIELDS}
        payload["severity"] = check_choice(severity, "severity", SEVERITIES)
        content = memories.render_episode(payload)
        require_text(content, "episode", max_bytes=MAX_CONTENT_BYTES)
        result = db.write(lambda c: memories.store_memory(
            c, namespace=ns, type="episode", content=content, created_by=who, episode=payload))
        app.wake("embeddings")
        return result

    @app.tool("read")
    def get_episode(memoryId: str) -> dict[str, Any] | None:
        """Fetch an episode by memory id with its structured fields; null when not an episode."""
        row = db.read(lambda c: memories.get_memory(c, memory_id=memoryId))
        if row is None or row["type"] != "episode":
            return None
        return memories.episode_doc(row)

    @app.tool("read")
    def list_episodes(
        namespace: str | None = None,
        orchestrator: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        fields: Fields = "full",
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """List episodes newest first, by `namespace` (or `prefix/*`) and author `orchestrator`."""
        scope = memories.scope_of(namespace, visible=app.read_prefixes())
        author = orchestrator or None
        return shape(db.read(lambda c: memories.list_memories(
            c, scope=scope, created_by=author, limit=limit, cursor=cursor, fields=fields, episodes=True)),
            detail, COMPACT, fields=fields)

    @app.tool("read")
    def search_episodes_by_keyword(query: str, namespace: str | None = None, limit: int | None = None,
                                   fields: Fields = "full", detail: Detail = "compact") -> dict[str, Any]:
        """Search episodes by keyword, with text_search's rules and result."""
        return run_search(query, namespace, limit, fields, detail, semantic=False)

    @app.tool("read")
    def search_episodes_by_semantic(query: str, namespace: str | None = None, limit: int | None = None,
                                    fields: Fields = "full", detail: Detail = "compact") -> dict[str, Any]:
        """Search episodes by meaning; keyword fallback with a `reason`."""
        return run_search(query, namespace, limit, fields, detail, semantic=True)
