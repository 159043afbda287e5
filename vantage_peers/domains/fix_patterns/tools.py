"""MCP tools for the fix-pattern knowledge base (spec §18 and §16 `link_issue_to_pattern`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import StrictBool

from ...core.compact import Compact, Detail, dense_text_for, shape
from ...core.ids import now_ms
from ...core.validators import MAX_CONTENT_BYTES, require_query, text, text_list
from ...db.paging import Fields, check_fields, clamp_limit
from ...pipeline.app import App
from ..memory.services import services
from . import search, store
from .embedding import CORPUS, VEC

Severity = Literal["critical", "major", "minor"]
MAX_SYMPTOM_BYTES = 65_536
MAX_NAME_BYTES = 500  # sourceProject, project, issueId, commit
# Compact answers (core/compact.py): a pattern is its id, whether validated, the symptom on one line, its day.
PATTERN = Compact(keys=("_id", "validated", "matchedBy"), text=("symptom",))
PATTERN_HIT = Compact(keys=("_id", "validated", "matchedBy"))  # a hit's snippet is its symptom's matched words


def _long(value: Any, field: str) -> str:
    return text(value, field, max_bytes=MAX_CONTENT_BYTES)  # type: ignore[return-value]


def _name(value: Any, field: str, *, required: bool = True) -> str | None:
    return text(value, field, max_bytes=MAX_NAME_BYTES, required=required)


def register(app: App) -> None:
    db = app.db
    dense_text_for(app, ("list_fix_patterns", "search_fix_patterns"))
    svc = services(app)  # the memory search's embedder, query cache and breaker, shared
    # Embedding jobs need no job of their own: the `embeddings` job serves every registered corpus.
    app.add_corpus(CORPUS)

    @app.tool("write", identity="createdBy", idempotent=True)
    def create_fix_pattern(
        symptom: str,
        rootCause: str,
        sourceProject: str,
        createdBy: str | None = None,
        tags: list[str] | None = None,
        stack: list[str] | None = None,
        severity: Severity | None = None,
        files: list[str] | None = None,
        validatedFix: str | None = None,
    ) -> dict[str, str]:
        """Record a bug you solved: symptom, root cause, fix if known; returns `{patternId}`.

        Then add_fix_attempt for each try (failures too).
        """
        creator = createdBy
        args = {
            "symptom": text(symptom, "symptom", max_bytes=MAX_SYMPTOM_BYTES),
            "root_cause": _long(rootCause, "rootCause"),
            "source_project": _name(sourceProject, "sourceProject"),
            "tags": text_list(tags, "tags"), "stack": text_list(stack, "stack"), "files": text_list(files, "files"),
            "validated_fix": _long(validatedFix, "validatedFix") if validatedFix is not None else None,
        }
        result = db.write(lambda c: store.create(c, created_by=creator, severity=severity, **args))
        app.wake("embeddings")
        return result

    @app.tool("read")
    def get_fix_pattern(patternId: str) -> dict[str, Any] | None:
        """Fetch a fix pattern with its attempts (oldest first, at most 200)."""
        return db.read(lambda c: store.get(c, pattern_id=patternId))

    @app.tool("write", identity="createdBy", shared="the fix-pattern knowledge base is the team's: any teammate records an attempt", idempotent=True)
    def add_fix_attempt(
        patternId: str,
        description: str,
        worked: StrictBool,
        why: str,
        createdBy: str | None = None,
        commit: str | None = None,
    ) -> dict[str, Any]:
        """Record one attempt at fixing a pattern's bug and whether it worked; returns `{attemptId}`.

        The first that worked becomes `validatedFix` when none is set.
        """
        creator = createdBy
        args = {
            "description": _long(description, "description"), "why": _long(why, "why"),
            "commit": _name(commit, "commit", required=False),
        }
        return db.write(lambda c: store.add_attempt(c, pattern_id=patternId, worked=worked, created_by=creator,
                                                    **args))

    @app.tool("write", identity="callerOrchestrator", identity_required=False,
              shared="the fix-pattern knowledge base is the team's: any teammate validates a fix (recorded as theirs)")
    def validate_fix(patternId: str, validatedFix: str, callerOrchestrator: str | None = None) -> dict[str, Any]:
        """Set a pattern's validated fix in your own words, replacing any earlier one; returns the pattern."""
        caller = callerOrchestrator
        fix = _long(validatedFix, "validatedFix")
        return db.write(lambda c: store.validate(c, pattern_id=patternId, validated_fix=fix, validated_by=caller))

    @app.tool("read")
    def search_fix_patterns(query: str, limit: int | None = None, project: str | None = None,
                            fields: Fields = "full", detail: Detail = "compact") -> dict[str, Any]:
        """Search fix patterns by meaning: call it BEFORE fixing any bug.

        Pass the error or symptom; apply a `validated` item's `validatedFix` (`detail: "full"` or get_fix_pattern).
        """
        words = require_query(query)
        scope = _name(project, "project", required=False)
        size = clamp_limit(limit, search.DEFAULT_LIMIT, search.MAX_LIMIT)
        vector, reason = svc.query_vector(db, words, table=VEC)
        projection = check_fields(fields)
        return shape(db.read(lambda c: search.search(c, query=words, vector=vector, reason=reason, project=scope,
                                                     limit=size, fields=projection)), detail, PATTERN_HIT, fields=projection)

    @app.tool("read")
    def list_fix_patterns(
        project: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        fields: Fields = "full",
        detail: Detail = "compact",
    ) -> dict[str, Any]:
        """List fix patterns newest first, optionally of one `project`, without attempts."""
        scope = _name(project, "project", required=False)
        return shape(db.read(lambda c: store.list_patterns(c, project=scope, limit=limit, cursor=cursor, fields=fields)),
                     detail, PATTERN, fields=fields)

    @app.tool("idempotent", shared="the fix-pattern knowledge base is the team's: any teammate links an issue")
    def link_issue_to_pattern(patternId: str, issueId: str) -> dict[str, Any]:
        """Link an issue ("owner/repo#282") to a fix pattern, once; returns `{added, linkedIssueIds}`."""
        issue = _name(issueId, "issueId")
        now = now_ms()
        side = app.extensions.get(store.ISSUE_SIDE)
        return db.write(lambda c: store.link_issue(c, pattern_id=patternId, issue_id=issue, now=now, issue_side=side))
