"""The one vocabulary of argument checks (foundation layer: imports only errors, limits, stdlib).

Three families share one module so that a field is checked the same way everywhere:
- raising checks for one value: `check_name` (an orchestrator/instance id), `require_text` /
  `require_query` (non-empty text, bytes counted with lone surrogates allowed: FTS quoting and
  the memory store handle those), `text` / `text_list` / `json_object` / `number` / `iso_date`
  (document fields, kept exactly as sent, lone surrogates refused), `check_choice` (an enum value);
- `Checker`, which collects `Failure`s for a whole untyped payload instead of raising, so a lint
  tool (validate_task_payload) can report them all; the domain keeps its own rules and error map.
Domain-specific rules (task lifecycles, memory types, …) stay in their domain.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidArgument
from .limits import MAX_CONTENT_BYTES

__all__ = [
    "MAX_CONTENT_BYTES", "MAX_FIELD_BYTES", "MAX_LIST_ITEMS", "MAX_NAME_LENGTH", "MAX_OBJECT_BYTES",
    "MAX_QUERY_BYTES", "Checker", "Failure", "check_choice", "check_name", "iso_date", "json_object", "number",
    "require_query", "require_text", "text", "text_list",
]

MAX_NAME_LENGTH = 200  # orchestrator and instance ids
MAX_QUERY_BYTES = 32_768  # every search tool accepts the same query size
MAX_FIELD_BYTES = 10_000  # short text (titles, list items, names of things)
MAX_LIST_ITEMS = 200
MAX_OBJECT_BYTES = 65_536
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def check_name(value: Any, field: str) -> str:
    """An orchestrator / instance id: a non-empty string of reasonable length (returned trimmed)."""
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


def require_query(value: Any, field: str = "query") -> str:
    """A search query: non-empty, at most MAX_QUERY_BYTES of UTF-8 (FTS quoting makes any text safe)."""
    return require_text(value, field, max_bytes=MAX_QUERY_BYTES)


def check_choice(value: Any, field: str, allowed: tuple[str, ...]) -> str:
    """One of `allowed` (an enum-valued string argument)."""
    if not isinstance(value, str) or value not in allowed:
        raise InvalidArgument(f"{field} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def _utf8_len(value: str, field: str) -> int:
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgument(f"{field} is not valid Unicode text (it holds a lone surrogate)") from None


def text(value: Any, field: str, *, max_bytes: int = MAX_FIELD_BYTES, required: bool = True,
         allow_blank: bool = False) -> str | None:
    """A string argument, kept exactly as sent (no trimming), size-bounded in UTF-8 bytes."""
    if value is None:
        if required:
            raise InvalidArgument(f"{field} is required")
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"{field} must be a string")
    if not allow_blank and not value.strip():
        raise InvalidArgument(f"{field} must be a non-empty string")
    if _utf8_len(value, field) > max_bytes:
        raise InvalidArgument(f"{field} is larger than {max_bytes} bytes")
    return value


def text_list(values: Any, field: str, *, max_items: int = MAX_LIST_ITEMS,
              max_bytes: int = MAX_FIELD_BYTES) -> list[str] | None:
    if values is None:
        return None
    if not isinstance(values, list):
        raise InvalidArgument(f"{field} must be an array of strings")
    if len(values) > max_items:
        raise InvalidArgument(f"{field} holds more than {max_items} items")
    return [text(v, f"{field}[{i}]", max_bytes=max_bytes) for i, v in enumerate(values)]  # type: ignore[misc]


def json_object(value: Any, field: str, *, max_bytes: int = MAX_OBJECT_BYTES) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidArgument(f"{field} must be an object")
    try:
        size = len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    except (ValueError, UnicodeEncodeError, TypeError):
        raise InvalidArgument(f"{field} must hold only JSON values (finite numbers, valid text)") from None
    if size > max_bytes:
        raise InvalidArgument(f"{field} is larger than {max_bytes} bytes")
    return value


def number(value: Any, field: str, *, minimum: float | None = 0, maximum: float | None = None,
           positive: bool = False, required: bool = True) -> int | float | None:
    """A finite JSON number; integral floats come back as int (100000.0 -> 100000)."""
    if value is None:
        if required:
            raise InvalidArgument(f"{field} is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"{field} must be a number")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgument(f"{field} must be a finite number")
        if value.is_integer() and abs(value) < 2**53:
            value = int(value)
    if abs(value) > 1e15:
        raise InvalidArgument(f"{field} is out of range (at most 1e15)")
    if positive and value <= 0:
        raise InvalidArgument(f"{field} must be greater than 0")
    if minimum is not None and value < minimum:
        raise InvalidArgument(f"{field} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise InvalidArgument(f"{field} must be at most {maximum}")
    return value


def iso_date(value: Any, field: str) -> str:
    """A calendar date `YYYY-MM-DD` (validated: 2026-02-30 is refused)."""
    if not isinstance(value, str) or not _DATE.fullmatch(value):
        raise InvalidArgument(f"{field} must be a date written YYYY-MM-DD, e.g. 2026-05-29")
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        raise InvalidArgument(f"{field} is not a real calendar date: {value}") from None
    return value


# -- collecting checks (a whole payload, every failure reported) ---------------------------------
@dataclass
class Failure:
    field: str
    message: str
    fix: Any
    code: str = "INVALID_ARGUMENT"

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.field, "code": self.code, "message": self.message, "fix": self.fix}


@dataclass
class Checker:
    """Collects failures for one payload."""

    payload: Mapping[str, Any]
    failures: list[Failure] = field(default_factory=list)

    def fail(self, name: str, message: str, fix: Any, code: str = "INVALID_ARGUMENT") -> None:
        self.failures.append(Failure(name, message, fix, code))

    def has(self, name: str) -> bool:
        return self.payload.get(name) is not None

    def text(self, name: str, *, required: bool = False, max_bytes: int, example: str) -> None:
        value = self.payload.get(name)
        if value is None:
            if required:
                self.fail(name, f"{name} is required", {name: example})
            return
        if not isinstance(value, str) or not value.strip():
            self.fail(name, f"{name} must be a non-empty string", {name: example})
        elif len(value.encode("utf-8", "surrogatepass")) > max_bytes:
            self.fail(name, f"{name} is larger than {max_bytes} bytes; shorten it", {name: example})

    def name(self, name: str, *, required: bool = False, example: str = "sigma") -> None:
        value = self.payload.get(name)
        if value is None:
            if required:
                self.fail(name, f"{name} is required (an orchestrator id such as {example!r})", {name: example})
            return
        if not isinstance(value, str) or not value.strip():
            self.fail(name, f"{name} must be a non-empty string (an orchestrator id, never a number)",
                      {name: example})
        elif len(value) > MAX_NAME_LENGTH:
            self.fail(name, f"{name} is longer than {MAX_NAME_LENGTH} characters", {name: example})

    def enum(self, name: str, allowed: tuple[str, ...], *, required: bool = False, example: str) -> None:
        value = self.payload.get(name)
        if value is None:
            if required:
                self.fail(name, f"{name} is required: one of {', '.join(allowed)}", {name: example})
            return
        if value not in allowed:
            self.fail(name, f"{name} must be one of {', '.join(allowed)} (a lowercase string), got {value!r}",
                      {name: example})

    def number(self, name: str, *, minimum: float = 0, maximum: float | None = None, integer: bool = False,
               example: Any = 30) -> None:
        value = self.payload.get(name)
        if value is None:
            return
        if integer and maximum is None:
            maximum = 2**63 - 1  # SQLite's integer range: the real tools refuse beyond it
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if ok and integer and isinstance(value, float) and not value.is_integer():
            ok = False
        if ok and (value < minimum or (maximum is not None and value > maximum) or value != value):
            ok = False
        if not ok:
            bounds = f">= {minimum}" + (f" and <= {maximum}" if maximum is not None else "")
            kind = "an integer (Unix ms)" if integer else "a number"
            self.fail(name, f"{name} must be {kind} {bounds}, got {value!r}", {name: example})

    def strings(self, name: str, *, max_items: int, max_len: int = 200, example: list[str]) -> None:
        value = self.payload.get(name)
        if value is None:
            return
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            self.fail(name, f"{name} must be an array of non-empty strings", {name: example})
        elif len(value) > max_items:
            self.fail(name, f"{name} holds more than {max_items} entries", {name: value[:max_items]})
        elif any(len(v) > max_len for v in value):
            self.fail(name, f"every {name} entry must be at most {max_len} characters", {name: example})
