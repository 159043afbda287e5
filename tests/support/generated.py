"""The files generated from a full registration (CONTRIBUTING.md): equal to what the code makes now,
or rewritten with VP_UPDATE_SNAPSHOTS=1."""

from __future__ import annotations

import os
from pathlib import Path


def check_generated(file: Path, text: str, test: str) -> None:
    """Fails when `file` is not `text` (a tool, job or corpus changed without regenerating it)."""
    if os.environ.get("VP_UPDATE_SNAPSHOTS") == "1":
        file.write_text(text, encoding="utf-8")
    assert file.read_text(encoding="utf-8") == text, (
        f"{file.name} is stale: VP_UPDATE_SNAPSHOTS=1 uv run pytest -n 0 {test}")
