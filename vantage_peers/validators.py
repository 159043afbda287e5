"""Argument validators shared by every domain: one vocabulary, one set of names."""

from __future__ import annotations

from typing import Any

from .errors import InvalidArgument

MAX_NAME_LENGTH = 200

def check_name(value: Any, field: str) -> str:
    """An orchestrator / instance id: a non-empty string of reasonable length."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{field} must be a non-empty string")
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidArgument(f"{field} is longer than {MAX_NAME_LENGTH} characters")
    return value.strip()


def require_text(value: Any, field: str, *, max_bytes: int | None = None) -> str:
    """A required free-text argument: non-empty after trimming, optionally bounded in UTF-8 bytes."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{field} must be a non-empty string")
    if max_bytes is not None and len(value.encode("utf-8", "surrogatepass")) > max_bytes:
        raise InvalidArgument(f"{field} is larger than {max_bytes} bytes")
    return value


MAX_QUERY_BYTES = 32_768  # every search tool accepts the same query size


def require_query(value: Any, field: str = "query") -> str:
    """A search query: non-empty, at most MAX_QUERY_BYTES of UTF-8 (FTS quoting makes any text safe)."""
    return require_text(value, field, max_bytes=MAX_QUERY_BYTES)
