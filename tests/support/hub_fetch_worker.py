"""Worker for the concurrent first download (imported by spawned processes; keep imports light)."""

from __future__ import annotations

from pathlib import Path


def fetch(entry, endpoint: str, cache: str, results) -> None:
    from vantage_peers.embedding import catalogue

    try:
        results.put(("ok", str(catalogue.fetch(entry, endpoint=endpoint, cache=Path(cache)))))
    except Exception as exc:  # noqa: BLE001 - reported to the test, which fails on it
        results.put(("error", f"{type(exc).__name__}: {exc}"))
