"""The one exception every embedding provider raises (its own module: `embeddings.py` picks the
provider and `local.py` is one, so neither imports the other at module level)."""

from __future__ import annotations


class EmbeddingError(Exception):
    """The endpoint could not embed; `status` is the HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
