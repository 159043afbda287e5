"""MCP tools for OKF bundles: export, validate (read-only) and import a namespace's data.

Over MCP a bundle travels base64-encoded in the `bundle` field, at most MAX_MCP_BUNDLE_BYTES
(16 MiB) compressed; bigger namespaces go through the CLI (`vantage-peers export` / `import`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
from typing import Any, Literal

from ...app import App
from ...errors import InvalidArgument
from .format import MCP_LIMITS
from .service import export_bundle, import_bundle, load, report

MAX_MCP_BUNDLE_BYTES = 16 * 1_048_576
Mode = Literal["dry-run", "merge", "replace"]


def _decode(value: Any) -> bytes:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument("bundle must be the base64 text of a .okf.tar.gz file (as export_okf_bundle returns)")
    if len(value) > (MAX_MCP_BUNDLE_BYTES * 4) // 3 + 8:
        raise InvalidArgument(f"bundle is larger than {MAX_MCP_BUNDLE_BYTES} bytes; use `vantage-peers import FILE`")
    try:
        return base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgument("bundle is not valid base64") from None


def register(app: App) -> None:
    db = app.db

    @app.tool("read")
    def export_okf_bundle(namespace: str) -> dict[str, Any]:
        """Export a namespace as a portable OKF bundle (gzipped tar, base64): memories, briefings, tasks.

        Holds every memory and episode of `namespace` (exact; superseded and soft-deleted ones too,
        so relations survive; expired ones not), the briefing notes whose topic is the namespace or
        that link one of its memories, and the tasks whose project is the namespace (for
        `project/<name>`, also `<name>`), with their work segments. Returns `{bundle, bytes, sha256,
        filename, manifest}`; bundles over 16 MiB are refused: use `vantage-peers export`.
        """
        out = io.BytesIO()
        manifest = export_bundle(db, namespace, out)
        data = out.getvalue()
        if len(data) > MAX_MCP_BUNDLE_BYTES:
            raise InvalidArgument(f"BUNDLE_TOO_LARGE: the bundle is {len(data)} bytes, over the MCP limit of "
                                  f"{MAX_MCP_BUNDLE_BYTES}; use `vantage-peers export --namespace NS -o FILE`")
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in namespace)[:80]
        return {"bundle": base64.b64encode(data).decode("ascii"), "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(), "filename": f"{safe}.okf.tar.gz", "manifest": manifest}

    @app.tool("read")
    def validate_okf_bundle(bundle: str) -> dict[str, Any]:
        """Check an OKF bundle without writing anything: container, manifest, version, hashes, records.

        `bundle` is base64 (as export_okf_bundle returns). Returns `{valid, problems, warnings,
        counts, formatVersion?, source?}`; each problem is `{path, code, message}` with a path such
        as `memories.jsonl:12.type`. Warnings (references outside the bundle) do not block import.
        """
        return report(load(io.BytesIO(_decode(bundle)), MCP_LIMITS))

    @app.tool("destructive")
    def import_okf_bundle(bundle: str, namespace: str, mode: Mode = "dry-run") -> dict[str, Any]:
        """Import an OKF bundle into a target namespace: `dry-run` (default), `merge` or `replace`.

        `dry-run` writes nothing and reports what merge and replace would add, skip and delete.
        `merge` adds what is not there yet (importing the same bundle twice adds nothing).
        `replace` deletes what the namespace owns (its memories, briefings and tasks, as export
        defines them) and imports the bundle, in one transaction. Ids that would collide are
        remapped and references follow; new memories are queued for embedding. An invalid bundle
        is refused with INVALID_BUNDLE and nothing is written. Returns `{mode, namespace,
        sourceNamespace, added, skipped, deleted, remapped, warnings, embeddingsQueued}` (counts
        per memories/briefings/tasks); a dry-run returns `{merge: {…}, replace: {…}, warnings}`.
        """
        parsed = load(io.BytesIO(_decode(bundle)), MCP_LIMITS)
        result = import_bundle(db, parsed, namespace, mode, actor=app.actor())
        if result.get("embeddingsQueued"):
            app.wake("embeddings")
        return result
