"""Bundle operations shared by the MCP tools and the CLI: export, validate, import."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any

from ... import __version__
from ...core.errors import Conflict, InvalidArgument
from ...core.ids import now_ms
from ...core.rbac import Actor
from ...db import Database
from ...db.integrity import constraint_errors
from ..memory.store import check_namespace
from . import export, importer
from .check import check_records
from .format import CLI_LIMITS, Bundle, Limits, read_bundle, write_bundle

MODES = ("dry-run", "merge", "replace")
Progress = Callable[[str, int], None]


class InvalidBundle(InvalidArgument):
    code = "INVALID_BUNDLE"


def export_bundle(db: Database, namespace: str, out: IO[bytes], progress: Progress | None = None) -> dict[str, Any]:
    """Write the namespace's bundle to `out` from one consistent snapshot; returns the manifest."""
    ns = check_namespace(namespace)
    now = now_ms()
    source = {"tool": "vantage-peers", "version": __version__, "namespace": ns, "exportedAt": now}
    return db.read(lambda c: write_bundle(out, source=source, members=export.members(c, ns, now), progress=progress))


def load(source: IO[bytes], limits: Limits = CLI_LIMITS, progress: Progress | None = None) -> Bundle:
    bundle = read_bundle(source, limits, progress)
    if bundle.ok:
        check_records(bundle)
    return bundle


def report(bundle: Bundle) -> dict[str, Any]:
    """The validate_okf_bundle result."""
    m = bundle.manifest
    out: dict[str, Any] = {
        "valid": bundle.ok,
        "problems": [p.as_dict() for p in bundle.problems],
        "warnings": [p.as_dict() for p in bundle.warnings],
        "counts": {"memories": len(bundle.records["memory"]), "briefings": len(bundle.records["briefing"]),
                   "tasks": len(bundle.records["task"])},
    }
    if m is not None:
        out["formatVersion"] = m.formatVersion
        out["source"] = m.source.model_dump(mode="json", exclude_none=True)
    return out


def _refuse(bundle: Bundle) -> None:
    first = "; ".join(f"{p.path}: {p.code}: {p.message}" for p in bundle.problems[:5])
    more = f" (+{len(bundle.problems) - 5} more; run validate_okf_bundle)" if len(bundle.problems) > 5 else ""
    raise InvalidBundle(f"the bundle was not imported, nothing was written: {first}{more}")


def import_bundle(db: Database, bundle: Bundle, namespace: str, mode: str, *, actor: Actor | None = None) -> dict[str, Any]:
    ns = check_namespace(namespace)
    if mode not in MODES:
        raise InvalidArgument(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    if not bundle.ok:
        _refuse(bundle)
    head: dict[str, Any] = {"mode": mode, "namespace": ns,
                            "sourceNamespace": bundle.manifest.source.namespace if bundle.manifest else None,
                            "warnings": [p.message for p in bundle.warnings][:100]}
    if mode == "dry-run":
        # Read-only: the same planning as merge and replace, in one read transaction.
        merge, replace = db.read(lambda c: (importer.plan(c, bundle, ns, "merge", actor=actor),
                                            importer.plan(c, bundle, ns, "replace", actor=actor)))
        return {**head, "dryRun": True, "merge": merge.summary(), "replace": replace.summary(),
                "warnings": head["warnings"] + merge.warnings[:100]}
    try:
        result = db.write(lambda c: importer.apply(c, bundle, ns, mode, actor=actor))
    except constraint_errors() as err:
        # e.g. replace deleting a task that a row of another table still references: all rolled back.
        raise Conflict(f"the import was rolled back, nothing was written: {err}") from None
    return {**head, "dryRun": False, **result.summary(), "warnings": head["warnings"] + result.warnings[:100],
            "embeddingsQueued": len(result.add["memory"])}
