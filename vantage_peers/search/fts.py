"""Turn user text into an FTS5 MATCH expression that can never be a syntax error.

Every whitespace-separated token becomes a quoted string (inner quotes doubled), so FTS operators
(`AND`, `OR`, `NOT`, `NEAR`, `col:`, `*`, `^`, parentheses) in user text are plain words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, Literal

_WORD = re.compile(r"\w", re.UNICODE)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
MAX_TOKENS = 32


def fts_query(text: str, mode: Literal["and", "or"] = "and") -> str | None:
    """The MATCH expression for `text`, or None when it holds nothing searchable."""
    tokens = []
    # NUL ends a C string inside FTS5's parser, leaving a quote unterminated: drop control chars.
    text = _CONTROL.sub(" ", text)
    for raw in text.split():
        if not _WORD.search(raw):  # punctuation-only tokens match nothing in unicode61
            continue
        tokens.append('"' + raw.replace('"', '""') + '"')
        if len(tokens) >= MAX_TOKENS:
            break
    if not tokens:
        return None
    return (" OR " if mode == "or" else " ").join(tokens)


def ranked(rows: Iterable[dict[str, Any]], shape: Callable[[dict[str, Any]], dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows carrying `rank` (bm25, lower is better) and `snippet` as documents with `score` and `snippet`."""
    out = []
    for row in rows:
        rank, snip = row.pop("rank"), row.pop("snippet", None)
        doc = shape(row)
        doc["score"] = round(-rank, 6)
        if snip is not None:
            doc["snippet"] = snip
        out.append(doc)
    return out
