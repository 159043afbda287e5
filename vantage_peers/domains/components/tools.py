"""MCP tools for the component registry."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from ...core.compact import Compact, Detail, dense_text_for, shape
from ...core.envelope import cut
from ...core.errors import InvalidArgument
from ...core.validators import MAX_CONTENT_BYTES, require_query, text
from ...db.paging import Fields, clamp_limit
from ...pipeline.app import App
from . import store

ComponentType = Literal["agent", "skill", "hook", "plugin"]
MAX_COMPONENT_BYTES = 4 * MAX_CONTENT_BYTES  # whole files, plugins included
# Compact answers (core/compact.py): name, type, version and day; the content is get_component's.
COMPONENT = Compact(keys=("_id", "name", "type", "version", "team"), short=("content",))


def _content(value: Any, digest: str | None) -> str:
    body = text(value, "content", max_bytes=MAX_COMPONENT_BYTES, allow_blank=True)
    assert body is not None
    if digest is not None:
        given = digest.lower().removeprefix("sha256:")
        actual = store.content_hash(body)
        if given != actual:
            raise InvalidArgument(
                f"contentHash {digest} does not match the sha256 of content ({actual}); the content was "
                "altered on the way, send it again"
            )
    return body


def register(app: App) -> None:
    db = app.db
    dense_text_for(app, ("list_components", "search_components"))

    @app.tool("write", identity="createdBy", idempotent=True)
    def register_component(
        name: str,
        type: ComponentType,
        content: str,
        createdBy: str | None = None,
        team: str | None = None,
        version: str | None = None,
        project: str | None = None,
        contentHash: str | None = None,
    ) -> dict[str, Any]:
        """Back up an agent, skill, hook or plugin file byte for byte; returns `{_id, revision, contentHash}`.

        The same (name, type) again adds a revision.
        """
        creator = createdBy
        args = {
            "name": text(name, "name", max_bytes=500), "type_": type,
            "content": _content(content, contentHash), "team": text(team, "team", required=False, max_bytes=500),
            "version": text(version, "version", required=False, max_bytes=200),
            "project": text(project, "project", required=False, max_bytes=500),
        }
        return db.write(lambda c: store.register(c, created_by=creator, **args))

    @app.tool("read")
    def get_component(
        name: str,
        type: ComponentType,
        version: str | None = None,
        revision: Annotated[int | None, Field(ge=1)] = None,
        includeHistory: bool = False,
    ) -> dict[str, Any] | None:
        """Fetch a component by name and type with its content; `revision` or `version` picks an older one."""
        def run(c) -> dict[str, Any] | None:
            doc = store.get(c, name=name, type_=type, version=version, revision=revision)
            if doc is not None and includeHistory:
                doc["history"] = store.history(c, doc["_id"])
            return doc

        return db.read(run)

    @app.tool("read")
    def list_components(
        type: ComponentType | None = None,
        team: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        fields: Fields = "full",
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """List components (latest revision each), newest first; `detail: "full"` items carry whole files."""
        return shape(db.read(
            lambda c: store.list_components(c, type_=type, team=team, limit=limit, cursor=cursor, fields=fields)
        ), detail, COMPONENT, fields=fields)

    @app.tool("write", identity="callerOrchestrator", identity_required=False,
              shared="the component registry is the team's: any teammate adds a revision (its author is recorded)")
    def update_component(
        name: str,
        type: ComponentType,
        content: str | None = None,
        version: str | None = None,
        team: str | None = None,
        project: str | None = None,
        contentHash: str | None = None,
        callerOrchestrator: str | None = None,
    ) -> dict[str, Any]:
        """Update a component by name and type (new content or version adds a revision); returns its summary."""
        caller = callerOrchestrator
        body = _content(content, contentHash) if content is not None else None
        if body is None and version is None and team is None and project is None:
            raise InvalidArgument("nothing to update: pass content, version, team or project")
        label = text(version, "version", required=False, max_bytes=200)
        group = text(team, "team", required=False, max_bytes=500)
        proj = text(project, "project", required=False, max_bytes=500)
        return db.write(
            lambda c: store.update(c, name=name, type_=type, caller=caller, content=body, version=label, team=group,
                                   project=proj)
        )

    @app.tool("destructive", identity="callerOrchestrator")
    def delete_component(name: str, type: ComponentType, callerOrchestrator: str | None = None) -> dict[str, Any]:
        """Remove a component and all its revisions (creator or `system`); returns `{deleted, revisionsDeleted}`."""
        caller = callerOrchestrator
        return db.write(lambda c: store.delete(c, name=name, type_=type, caller=caller))

    @app.tool("read")
    def search_components(query: str, type: ComponentType | None = None, limit: int | None = None,
                          detail: Detail = "compact") -> dict[str, Any]:
        """Find components whose name or team contains the words of `query` (items without content)."""
        words = require_query(query)
        size = clamp_limit(limit)
        return shape(cut(db.read(lambda c: store.search(c, query=words, type_=type, limit=size))), detail, COMPONENT)
