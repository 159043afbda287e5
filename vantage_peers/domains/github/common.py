"""Small shared pieces of the GitHub domain: slug validation, time conversion, the meta clock."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from ...core.errors import InvalidArgument

REPO_SLUG = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
ISSUE_STATUSES = ("open", "in_progress", "fixed", "verified", "closed")
MAX_TEXT = 65_536  # GitHub caps an issue body at 65,536 characters


def check_repo(value: Any, field: str = "repo") -> str:
    """An `owner/name` slug as GitHub allows it (no URL, no spaces, no path traversal)."""
    if not isinstance(value, str) or not REPO_SLUG.match(value.strip()) or ".." in value:
        raise InvalidArgument(f"{field} must be an owner/name GitHub slug such as 'octo-org/octo-repo', got {value!r}")
    return value.strip()


def check_number(value: Any, field: str = "issueNumber") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31:
        raise InvalidArgument(f"{field} must be a positive integer, got {value!r}")
    return value


def iso_to_ms(value: Any) -> int | None:
    """GitHub's ISO 8601 timestamps ("2019-05-15T15:20:33Z") as Unix ms; None when absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


def utc_day(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d")


def utc_minute(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def clip(text: Any, limit: int = MAX_TEXT) -> str | None:
    if not isinstance(text, str):
        return None
    return text if len(text) <= limit else text[:limit]
