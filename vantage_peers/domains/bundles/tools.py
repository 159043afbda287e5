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

from ...core.errors import InvalidArgument
from ...pipeline.app import App
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
        """Export a namespace's memories, briefings and tasks as an OKF bundle (base64 tar.gz); returns `{bundle, manifest, …}`."""
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
        """Check an OKF bundle (base64) without writing; returns `{valid, problems, warnings, counts}`."""
        return report(load(io.BytesIO(_decode(bundle)), MCP_LIMITS))

    @app.tool("destructive")
    def import_okf_bundle(bundle: str, namespace: str, mode: Mode = "dry-run") -> dict[str, Any]:
        """Import an OKF bundle into a namespace: `dry-run` (default), `merge` or `replace`; returns counts.

        `replace` deletes what the namespace owns, then imports, in one transaction; colliding ids are remapped.
        """
        parsed = load(io.BytesIO(_decode(bundle)), MCP_LIMITS)
        result = import_bundle(db, parsed, namespace, mode, actor=app.actor())
        if result.get("embeddingsQueued"):
            app.wake("embeddings")
        return result
