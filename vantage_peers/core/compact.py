"""Compact answers (issue 34): what a list or search tool returns unless asked for `detail: "full"`.

Every item of a list answer lands in the calling agent's context, twice (the text content and the
structured content). By default a list/search tool answers with a few identifying keys per item, a
one-line `snippet` of its main text, and its `date` (day of creation); `detail: "full"` answers with
the whole documents, and `get_<thing>` fetches one. Five items fit in about 1 KB per copy.

`Compact` names, per tool family, the keys kept and the text the snippet comes from; `shape` applies
it to an answer (`{items, ...}` or a bare list). An explicit `fields: "lite"` keeps its own projection
(the documented lite keys): `detail` shapes the default, full-document answer only.
`dense_text_for` makes a tool's text content compact JSON (the SDK indents it, ≈40 % more bytes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import pydantic_core

from .errors import InvalidArgument

Detail = Literal["compact", "full"]
DETAILS = ("compact", "full")
SNIPPET_CHARS = 48  # one line of a terminal; the full text is one `detail: "full"` or get_* away


def check_detail(detail: str | None) -> str:
    if detail in (None, "compact"):
        return "compact"
    if detail == "full":
        return "full"
    raise InvalidArgument(f"detail must be 'compact' or 'full', got {detail!r}")


def one_line(text: Any, limit: int = SNIPPET_CHARS) -> str:
    """`text` on one line (runs of whitespace become one space), cut to `limit` characters with "…"."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def day(ms: Any) -> str | None:
    """Epoch milliseconds as a UTC day, YYYY-MM-DD."""
    if not isinstance(ms, int) or isinstance(ms, bool):
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d")


@dataclass(frozen=True)
class Compact:
    """One family's compact item: `keys` as they are; each of `text` kept whole when it is one short
    line, else a `snippet` from the first long one (an item's own `snippet`, e.g. a search hit's matched
    words, comes first); and `date`."""

    keys: tuple[str, ...]
    text: tuple[str, ...] = ()
    short: tuple[str, ...] = ()  # texts kept only when one short line (no snippet from them)
    limit: int = SNIPPET_CHARS

    def item(self, doc: dict[str, Any]) -> dict[str, Any]:
        out = {key: doc[key] for key in self.keys if key in doc}
        long = []
        for name in (*self.text, *self.short):  # a short one-line text is kept whole, under its name
            value = doc.get(name)
            if isinstance(value, str) and len(value) <= self.limit and "\n" not in value:
                out[name] = value
            elif value and name in self.text:
                long.append(name)
        for name in ("snippet", *long):
            if doc.get(name):
                out["snippet"] = one_line(doc[name], self.limit)
                break
        if "date" not in out:
            when = day(doc.get("_creationTime"))
            if when is not None:
                out["date"] = when
        return out


def shape(answer: Any, detail: str | None, spec: Compact, *, fields: str | None = "full",
          key: str = "items") -> Any:
    """`answer` with its items compacted, unless `detail` is "full" or the caller chose `fields: "lite"`."""
    if check_detail(detail) == "full" or fields == "lite":
        return answer
    if isinstance(answer, list):
        return [spec.item(doc) if isinstance(doc, dict) else doc for doc in answer]
    if isinstance(answer, dict) and isinstance(answer.get(key), list):
        return {**answer, key: [spec.item(doc) if isinstance(doc, dict) else doc for doc in answer[key]]}
    return answer


def dense_text_for(app: Any, names: Sequence[str]) -> None:
    """The tools `names` of `app` answer dense text: the pipeline renders their one text block as
    compact JSON (pipeline/calls.py `_visible`) instead of the SDK's indented one."""
    app.dense_text.update(names)


def indented_json(value: Any) -> str:
    """JSON text as the SDK writes a dict answer (indented by 2, UTF-8 kept), by pydantic_core's encoder:
    json.dumps(indent=2) is Python's pure encoder, ~9x slower (0.09 ms for 20 messages)."""
    return pydantic_core.to_json(value, indent=2, fallback=str).decode()


def dense_json(value: Any) -> str:
    """The same JSON without indentation (UTF-8 kept): ~40 % fewer bytes in the agent's context."""
    return pydantic_core.to_json(value, fallback=str).decode()
